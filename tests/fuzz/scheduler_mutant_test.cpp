// The scheduler mutants (harness/scheduler_mutant.h) and failed assertions of the engine model
// at the campaign level: each mutant is killed by the engine campaign on host at a fixed seed
// with the finding of its rule, shrunk, and its trace replays, without the mutant, to the very
// same finding; a failed assertion inside the oracle's step is a finding of its own kind in a
// campaign (through forked children), in `run` (simulate) and in the replay of its trace.
#include "fuzz/engine/engine_fuzz.h"
#include "harness/replay.h"
#include "harness/scheduler_mutant.h"
#include "harness/simulate.h"
#include "model/presets.h"
#include "oracle/engine/step_probe.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mc::fuzz {
namespace {

using harness::SchedulerMutant;

TEST(SchedulerMutantCatalogue, ListedAndRoundTrip) {
  const auto all = gpu::scheduler_mutants();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].name, "prefix_hit_one_block_short");
  EXPECT_EQ(all[1].name, "spec_blocks_left_behind");
  EXPECT_EQ(all[2].name, "async_frees_visible_at_once");
  EXPECT_EQ(all[3].name, "hit_lost_at_exact_boundary");
  EXPECT_EQ(all[4].name, "lookahead_displaces_running_column");
  EXPECT_EQ(all[5].name, "hit_leaves_free_entry");
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto m = static_cast<SchedulerMutant>(i + 1);
    EXPECT_EQ(harness::to_string(m), all[i].name);
    EXPECT_EQ(harness::find_scheduler_mutant(all[i].name), m);
    EXPECT_EQ(all[i].level, gpu::MutantLevel::scheduler);
    EXPECT_EQ(gpu::find_mutant(all[i].name), &all[i]);
    EXPECT_FALSE(gpu::engine::find_runner_mutant(all[i].name).has_value());
  }
  EXPECT_EQ(gpu::to_string(gpu::MutantLevel::scheduler), "scheduler");
  EXPECT_EQ(gpu::runner_mutants().size() + all.size() + gpu::kernel_mutants().size(),
            gpu::mutant_catalogue().size());
  EXPECT_FALSE(harness::find_scheduler_mutant("prev_c_division").has_value());
}

struct SchedulerKill {
  SchedulerMutant mutant;
  std::string finding_kind;
  std::uint64_t seed;
  std::int64_t cases_max;
};

void PrintTo(const SchedulerKill& k, std::ostream* os) {
  *os << harness::to_string(k.mutant);
}

class SchedulerMutantKilled : public ::testing::TestWithParam<SchedulerKill> {};

TEST_P(SchedulerMutantKilled, ShrunkAndItsTraceReplaysToTheSameFinding) {
  const SchedulerKill& k = GetParam();
  model::testing::TempDir dir;
  CampaignOptions o{.seed = k.seed, .cases_max = k.cases_max, .max_size = 60, .out_dir = dir.path(), .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{.run = {.scheduler_mutant = k.mutant}};
  const CampaignReport r = run_engine_fuzz(o, e);
  ASSERT_EQ(r.findings.size(), 1u) << harness::to_string(k.mutant) << " survived " << r.cases;
  const Finding& f = r.findings.front();
  EXPECT_EQ(f.signature.difference, "finding:" + k.finding_kind);
  EXPECT_EQ(f.signature.kind, "oracle-check");
  EXPECT_EQ(f.runs.summary(), "failed 6 of 6 runs");
  ASSERT_NE(f.counterexample_as<EngineCounterexample>(), nullptr);
  const EngineCounterexample& cx = *f.counterexample_as<EngineCounterexample>();
  EXPECT_TRUE(cx.shrink_kept);
  EXPECT_LE(cx.steps, 8) << cx.failure << "\n" << cx.description;
  EXPECT_LE(cx.requests, 3) << cx.failure << "\n" << cx.description;
  EXPECT_NE(cx.reproduce.find("--mutant " + std::string(harness::to_string(k.mutant))),
            std::string::npos);
  // The clean scheduler holds on the shrunk case; the mutant fails it again the same way.
  EXPECT_FALSE(run_engine_case(cx.shrunk, {}).failed());
  const EngineOutcome again = run_engine_case(cx.shrunk, {.scheduler_mutant = k.mutant});
  ASSERT_TRUE(again.failed());
  EXPECT_EQ(again.failure->text, cx.failure);
  // The trace holds the buggy steps: replayed with no mutant, the same finding at its step.
  const harness::ReplayResult replayed =
      harness::replay_file(cx.shrunk_trace, {.v1_copy_path = cx.shrunk.engine.runner.v1_copy_path});
  ASSERT_TRUE(replayed.finding.has_value()) << replayed.summary();
  EXPECT_EQ(oracle::engine::to_string(replayed.finding->kind), k.finding_kind);
  EXPECT_EQ(replayed.finding->step, cx.difference.step);
  EXPECT_EQ(replayed.finding->message, cx.difference.text);
  EXPECT_EQ(replayed.stop_step, cx.steps - 1);
}

// Found with `mambacheck fuzz --level engine --backend host --mutant NAME` at seed 1:
// prefix_hit_one_block_short is killed by case 15 (a request sharing a cached boundary with
// one before it); spec_blocks_left_behind needs a prefill chunk that moves the running block
// two blocks past the old one with drafts on, first met by case 54 (run here as its own seed);
// async_frees_visible_at_once needs an async case whose planning frees a block the step in
// flight can still touch and takes one, first met by case 47 (r0 finishes while its row is in
// flight and r1, arriving, gets its block); hit_lost_at_exact_boundary by case 15 (a resumed
// request whose cacheable tokens end on a cached boundary); lookahead_displaces_running_column
// by case 42 (an EAGLE case whose first chunk ends on the first page boundary, as in #57605);
// hit_leaves_free_entry by case 8 (the block r1 revived by its hit comes back to r1 as a new
// block at the next take, while its hit still holds it).
INSTANTIATE_TEST_SUITE_P(
    All, SchedulerMutantKilled,
    ::testing::Values(
        SchedulerKill{SchedulerMutant::prefix_hit_one_block_short, "wrong_prefix_hit", 1, 20},
        SchedulerKill{SchedulerMutant::spec_blocks_left_behind, "spec_blocks_not_moved", 54, 1},
        SchedulerKill{SchedulerMutant::async_frees_visible_at_once, "in_flight_block_reused", 47,
                      1},
        SchedulerKill{SchedulerMutant::hit_lost_at_exact_boundary, "wrong_prefix_hit", 15, 1},
        SchedulerKill{SchedulerMutant::lookahead_displaces_running_column, "bad_index", 42, 1},
        SchedulerKill{SchedulerMutant::hit_leaves_free_entry, "inconsistent_step", 8, 1}),
    [](const ::testing::TestParamInfo<SchedulerKill>& param_info) {
      return std::string(harness::to_string(param_info.param.mutant));
    });

// async_frees_visible_at_once by hand (tests/oracle/engine/async_test.cpp walks the clean run):
// r0 on tiny-mamba2 with async scheduling, step 2 accepting both drafts. Planning step 4 frees
// column 2 (block 2, in step 3's table), which the model's pool holds back; step 3's row reads
// column 3 and writes from there on, so block 2 is one the step in flight cannot touch. The
// mutant's pool hands nothing out that step 3 can touch: the run is the clean one, and a
// replay of its steps, which lets a manager hand such a block out at once (vLLM does), holds.
TEST(AsyncFreesVisibleAtOnce, AStaleBlockTheStepInFlightCannotTouchIsNoBug) {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  const model::Layout layout = model::build_layout(p.config, p.spec);
  oracle::engine::RequestSpec r{.req_id = "r0", .num_prompt_tokens = 10, .max_len = 30};
  r.tokens.resize(50);
  std::iota(r.tokens.begin(), r.tokens.end(), 100);
  oracle::engine::EngineOptions o;
  o.scheduler.token_budget = 8;
  o.scheduler.full_drafts_per_million = 1'000'000;
  o.scheduler.async_scheduling = true;
  oracle::engine::Engine e(layout, {r}, 1, o);
  const auto mutant =
      harness::scheduler_mutant_edit(SchedulerMutant::async_frees_visible_at_once, e);
  const auto edit = [&](model::Step& s) {
    mutant(s);
    if (s.index == 2) oracle::engine::force_acceptance(s.scheduled[0], 10, r.tokens, 3);
  };
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(e.step(edit)) << i;
  EXPECT_FALSE(e.report().first_finding.has_value());
  EXPECT_EQ(e.last_step().index, 4);
  // Held back by the model (the free counted) and not handed out: step 4 takes block 6.
  EXPECT_EQ(e.last_record().frees_held_back, 1);
  EXPECT_EQ(e.last_step().cached_requests[0].new_block_ids[0], std::vector<std::int32_t>{6});
}

// Makes MC_ASSERT fail inside the oracle's step of the given index while it lives.
struct ProbeAt {
  explicit ProbeAt(std::int64_t failing_step) {
    oracle::engine::set_step_probe_for_testing(
        [failing_step](std::int64_t step) { MC_ASSERT(step != failing_step); });
  }
  ~ProbeAt() { oracle::engine::set_step_probe_for_testing({}); }
};

TEST(InternalAssertion, ACampaignReportsShrinksAndSavesIt) {
  model::testing::TempDir dir;
  const ProbeAt probe(3);
  CampaignOptions o{.seed = 1, .cases_max = 20, .max_size = 30, .out_dir = dir.path(), .shrink = kEngineShrinkLimits, .isolate = true};
  const EngineLevelOptions e{};
  const CampaignReport r = run_engine_fuzz(o, e);
  ASSERT_EQ(r.findings.size(), 1u);
  const Finding& f = r.findings.front();
  EXPECT_EQ(f.signature.difference, "finding:internal_assertion");
  EXPECT_EQ(f.runs.summary(), "failed 6 of 6 runs");
  ASSERT_NE(f.counterexample_as<EngineCounterexample>(), nullptr);
  const EngineCounterexample& cx = *f.counterexample_as<EngineCounterexample>();
  EXPECT_EQ(cx.difference.step, 3);
  EXPECT_EQ(cx.steps, 4);
  EXPECT_EQ(cx.requests, 1);
  EXPECT_NE(cx.failure.find("internal_assertion: step 3: an assumption of the engine model "
                            "failed: step != failing_step at "),
            std::string::npos)
      << cx.failure;
  EXPECT_TRUE(std::filesystem::exists(cx.dir / "report.txt"));
  const harness::ReplayResult replayed =
      harness::replay_file(cx.shrunk_trace, {.v1_copy_path = cx.shrunk.engine.runner.v1_copy_path});
  ASSERT_TRUE(replayed.finding.has_value()) << replayed.summary();
  EXPECT_EQ(replayed.finding->kind, oracle::engine::FindingKind::internal_assertion);
  EXPECT_EQ(replayed.finding->step, 3);
  EXPECT_EQ(replayed.stop_step, 3);
}

TEST(InternalAssertion, ARunEndsWithItsFinding) {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  harness::SimulationOptions s{.config = p.config, .spec = p.spec, .num_steps = 20};
  EXPECT_TRUE(harness::simulate(s).held());
  const ProbeAt probe(5);
  const harness::SimulationResult r = harness::simulate(s);
  ASSERT_TRUE(r.finding.has_value());
  EXPECT_EQ(r.finding->kind, oracle::engine::FindingKind::internal_assertion);
  EXPECT_EQ(r.finding->step, 5);
  EXPECT_EQ(r.report.steps, 6);
  EXPECT_EQ(r.steps_compared, 5);
}

} // namespace
} // namespace mc::fuzz
