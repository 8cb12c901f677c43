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
  options.scheduler.reset_prefix_cache_per_million = 10'000;
  options.scheduler.abort_per_million = 5'000;
  options.scheduler.async_scheduling = rc.async;
  return run_engine(config, spec, steps, requests, seed, options);
}

void expect_clean(const RunCase& rc, std::uint64_t seed) {
  const EngineReport r = run_case(rc, seed, 6000, 600);
  ASSERT_FALSE(r.first_finding.has_value()) << r.first_finding->message;
  EXPECT_GT(r.request_steps, 1000);
  EXPECT_GT(r.prefix_hits, 0);
  EXPECT_GT(r.preemptions + r.forced_preemptions, 0);
}

using model::CacheMode;
using model::ConvLayout;
using model::RunnerFlavour;

class EngineRandomized : public ::testing::TestWithParam<RunCase> {};

TEST_P(EngineRandomized, EveryInvariantHoldsForThousandsOfSteps) {
  for (std::uint64_t seed : {1u, 2u})
    expect_clean(GetParam(), seed);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, EngineRandomized,
    ::testing::Values(RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::precopy, ConvLayout::SD, 2, 24, false},
                      RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::batch_copy, ConvLayout::SD, 2, 24, false},
                      RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v1, V1CopyPath::precopy,
                              ConvLayout::DS, 2, 20, true},
                      RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::DS, 2, 24, false},
                      RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v2, V1CopyPath::precopy,
                              ConvLayout::SD, 1, 16, true},
                      RunCase{"tiny-mixed", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::batch_copy, ConvLayout::DS, 0, 16, false},
                      RunCase{"tiny-mixed", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::SD, 0, 16, false},
                      RunCase{"tiny-linear", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::SD, 2, 12, false},
                      RunCase{"tiny-mamba2", CacheMode::all, RunnerFlavour::v1, V1CopyPath::precopy,
                              ConvLayout::SD, 0, 32, false},
                      RunCase{"tiny-kda", CacheMode::all, RunnerFlavour::v2, V1CopyPath::precopy,
                              ConvLayout::DS, 0, 32, true}));

// A DS conv state shifted by a bias cannot be one flat copy: V1's batch_copy path must report
// it as unsupported (class E), never copy wrong bytes.
TEST(EngineRandomizedDS, BatchCopyReportsDsWithBiasAsUnsupported) {
  const EngineReport r = run_case({"tiny-mamba2", CacheMode::align, RunnerFlavour::v1,
                                   V1CopyPath::batch_copy, ConvLayout::DS, 2, 24, false},
                                  1, 4000, 300);
  ASSERT_TRUE(r.first_finding.has_value());
  EXPECT_EQ(r.first_finding->kind, FindingKind::unsupported_copy) << r.first_finding->message;
}

} // namespace
} // namespace mc::oracle::engine
