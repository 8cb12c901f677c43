// The oracle runner checks every pre-step copy source against the sequential ground truth
// before it copies, so a stale or mis-seeded column (REFERENCE.md 5, class A) is reported
// where it is used, with where the column came from. The oracle is never broken on purpose:
// to see the check fire, a test finds the source block of a copy in a clean run, reruns the
// same seed, and flips that block's bytes just before the step that reads it.
#include "model/presets.h"
#include "model/prng.h"
#include "oracle/engine/driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>

namespace mc::oracle::engine {
namespace {

struct SeededRun {
  model::Layout layout;
  EngineOptions options;
  std::vector<RequestSpec> requests;
  std::uint64_t seed = 0;
};

SeededRun tiny_run(model::RunnerFlavour flavour, std::int32_t resets_per_million,
                   std::uint64_t seed) {
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  model::LayoutSpec spec = preset.spec;
  spec.num_blocks = 24;
  SeededRun run{.layout = model::build_layout(preset.config, spec), .seed = seed};
  run.options.runner.flavour = flavour;
  run.options.scheduler.reset_prefix_cache_per_million = resets_per_million;
  validate_options(run.options, run.layout);
  model::SplitMix64 rng = model::SplitMix64::from_seed(seed);
  run.requests = generate_workload(run.options.workload, 200, model::kSpecTokensMax + 2, rng);
  return run;
}

bool is_pre_step(model::LaunchKind kind) {
  return kind == model::LaunchKind::precopy || kind == model::LaunchKind::batch_copy;
}

struct PlannedCopy {
  std::int64_t step = -1;
  std::string req_id;
  model::CopyDecision copy;
};

using RowFilter = std::function<bool(const model::Step&, const model::ScheduledRequest&)>;

// The first pre-step copy between two columns, in a clean run, of a batch row `wanted` accepts
// and whose source block no earlier row of the step reads (a prefix hit shares blocks).
std::optional<PlannedCopy> first_copy(const SeededRun& run, const RowFilter& wanted) {
  Engine engine(run.layout, run.requests, run.seed, run.options);
  for (int i = 0; i < 3000 && engine.step(); ++i) {
    const model::Step& step = engine.last_step();
    std::vector<const model::CopyDecision*> copies;
    for (const LaunchRecord& launch : engine.last_record().launches)
      if (is_pre_step(launch.kind))
        for (const model::CopyDecision& d : launch.decisions)
          if (d.src_col != d.dst_col) copies.push_back(&d);
    for (const model::CopyDecision* d : copies) {
      const model::ScheduledRequest& row = step.scheduled[static_cast<std::size_t>(d->batch_row)];
      const bool shared = std::ranges::any_of(copies, [&](const model::CopyDecision* other) {
        return other->batch_row < d->batch_row && other->src_block_id == d->src_block_id;
      });
      if (!shared && wanted(step, row))
        return PlannedCopy{.step = step.index, .req_id = row.req_id, .copy = *d};
    }
  }
  EXPECT_FALSE(engine.report().first_finding.has_value()) << engine.report().first_finding->message;
  return std::nullopt;
}

// Reruns `run` and overwrites the planned copy's source block just before its step: a
// temporal state with the state of a sequence no request has, a conv window with no tokens.
std::optional<Finding> run_with_damaged_source(const SeededRun& run, const PlannedCopy& planned) {
  Engine engine(run.layout, run.requests, run.seed, run.options);
  const model::StateTensor& t = run.layout.tensors[static_cast<std::size_t>(planned.copy.tensor)];
  auto damage = [&](model::Step& step) {
    if (step.index != planned.step) return;
    StateStore& states = engine.runner().states();
    if (t.kind() == model::StateKind::temporal)
      states.write_temporal(planned.copy.tensor, planned.copy.src_block_id, 0x5EED);
    else
      states.write_conv(planned.copy.tensor, planned.copy.src_block_id, 1, 0, {});
  };
  while (engine.step(damage) && engine.last_step().index < planned.step) {
  }
  return engine.report().first_finding;
}

void expect_caught(const std::optional<Finding>& finding, const PlannedCopy& planned) {
  ASSERT_TRUE(finding.has_value());
  const Finding& f = *finding;
  EXPECT_EQ(f.kind, FindingKind::wrong_copy_source) << f.message;
  EXPECT_EQ(f.step, planned.step) << f.message;
  EXPECT_EQ(f.req_id, planned.req_id) << f.message;
  EXPECT_EQ(f.tensor, planned.copy.tensor) << f.message;
  EXPECT_EQ(f.block_id, planned.copy.src_block_id) << f.message;
  EXPECT_NE(f.message.find("reads a wrong source"), std::string::npos) << f.message;
}

bool is_resumed(const model::Step& step, const model::ScheduledRequest& row) {
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.req_id == row.req_id) return c.resumed;
  return false;
}

bool is_new_with_hit(const model::Step& step, const model::ScheduledRequest& row) {
  for (const model::NewRequestData& n : step.new_requests)
    if (n.req_id == row.req_id) return n.num_computed_tokens > 0;
  return false;
}

// #35157: a request force-preempted by reset_prefix_cache comes back only among the resumed;
// its column must be derived afresh, as (num_computed - 1) // B with B = 4.
TEST(SourceCheck, DamagedSourceOfAResumedRequestIsCaughtInV1) {
  const SeededRun run = tiny_run(model::RunnerFlavour::v1, 20'000, 7);
  const std::optional<PlannedCopy> planned = first_copy(run, is_resumed);
  ASSERT_TRUE(planned.has_value()) << "no resumed request copied in the clean run";
  const std::optional<Finding> finding = run_with_damaged_source(run, *planned);
  expect_caught(finding, *planned);
  EXPECT_NE(finding->message.find("was derived as (num_computed - 1) // 4"), std::string::npos)
      << finding->message;
}

// #53142: V2 seeds a new request's slot from its prefix hit with the mamba block size (4 in
// the tiny presets, the attention block size is 2); only a prefix hit makes the seed matter.
TEST(SourceCheck, DamagedSeededSourceIsCaughtInV2) {
  const SeededRun run = tiny_run(model::RunnerFlavour::v2, 0, 11);
  const std::optional<PlannedCopy> planned = first_copy(run, is_new_with_hit);
  ASSERT_TRUE(planned.has_value()) << "no prefix hit copied in the clean run";
  const std::optional<Finding> finding = run_with_damaged_source(run, *planned);
  expect_caught(finding, *planned);
  EXPECT_NE(finding->message.find("was seeded this step as"), std::string::npos)
      << finding->message;
  EXPECT_NE(finding->message.find(" // 4 = "), std::string::npos) << finding->message;
}

// The same rerun without the damage finds nothing: the finding above is the damage's.
TEST(SourceCheck, UndamagedRerunFindsNothing) {
  const SeededRun run = tiny_run(model::RunnerFlavour::v2, 0, 11);
  Engine engine(run.layout, run.requests, run.seed, run.options);
  for (int i = 0; i < 3000 && engine.step(); ++i) {
  }
  EXPECT_FALSE(engine.report().first_finding.has_value()) << engine.report().first_finding->message;
  EXPECT_GT(engine.report().prefix_hits, 0);
}

} // namespace
} // namespace mc::oracle::engine
