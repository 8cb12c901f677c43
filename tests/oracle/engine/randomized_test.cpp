// Long randomized engine runs: V1 and V2, align and all, SD and DS, small pools so that
// preemption and reset_prefix_cache happen; every invariant holds for every step.
#include "model/presets.h"
#include "oracle/engine/driver.h"

#include <gtest/gtest.h>

namespace mc::oracle::engine {
namespace {

struct RunCase {
  const char* preset;
  model::CacheMode mode;
  model::RunnerFlavour flavour;
  V1CopyPath copy_path;
  model::ConvLayout conv_layout;
  std::int32_t num_spec;
  std::int64_t num_blocks;
  bool async;
};

EngineReport run_case(const RunCase& rc, std::uint64_t seed, std::int64_t steps,
                      std::int32_t requests) {
  const model::Preset& preset = model::find_preset(rc.preset);
  model::CacheConfig config = preset.config;
  config.mode = rc.mode;
  config.conv_layout = rc.conv_layout;
  config.runner = rc.flavour;
  config.num_spec_tokens = rc.num_spec;
  config.num_spec_blocks = rc.mode == model::CacheMode::align ? rc.num_spec : 0;
  model::LayoutSpec spec = preset.spec;
  spec.num_blocks = rc.num_blocks;
  EngineOptions options;
  options.runner.flavour = rc.flavour;
  options.runner.v1_copy_path = rc.copy_path;
  options.scheduler.reset_prefix_cache_per_million = 4'000;
  options.scheduler.abort_per_million = 5'000;
  options.scheduler.async_frees = rc.async;
  return run_engine(config, spec, steps, requests, seed, options);
}

void expect_clean(const RunCase& rc, std::uint64_t seed) {
  const EngineReport r = run_case(rc, seed, 4000, 300);
  ASSERT_FALSE(r.first_finding.has_value()) << r.first_finding->message;
  EXPECT_GT(r.request_steps, 1000);
  EXPECT_GT(r.prefix_hits, 0);
  EXPECT_GT(r.preemptions + r.forced_preemptions, 0);
}

using model::CacheMode;
using model::ConvLayout;
using model::RunnerFlavour;

TEST(EngineRandomized, V1AlignPrecopySD) {
  expect_clean({"tiny-mamba2", CacheMode::align, RunnerFlavour::v1, V1CopyPath::precopy,
                ConvLayout::SD, 2, 24, false},
               1);
}

} // namespace
} // namespace mc::oracle::engine
namespace mc::oracle::engine {
TEST(EngineDebug, Print) {
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  model::LayoutSpec spec = preset.spec;
  spec.num_blocks = 24;
  EngineOptions options;
  options.scheduler.reset_prefix_cache_per_million = 4'000;
  options.scheduler.abort_per_million = 5'000;
  const EngineReport r = run_engine(preset.config, spec, 4000, 300, 1, options);
  std::printf("steps %ld rs %ld tok %ld fin %ld ab %ld pre %ld fpre %ld resets %ld hits %ld "
              "launches %ld bytes %ld\n",
              r.steps, r.request_steps, r.tokens, r.finished, r.aborts, r.preemptions,
              r.forced_preemptions, r.resets, r.prefix_hits, r.launches, r.bytes_checked);
  for (auto& [k, v] : r.copies_by_kind)
    std::printf("  %s %ld\n", k.c_str(), v);
  if (r.first_finding) std::printf("%s\n", r.first_finding->message.c_str());
}
} // namespace mc::oracle::engine
