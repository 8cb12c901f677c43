// Engine-level coverage (harness/engine_coverage.h) of library traces whose preemptions,
// resets, prefix hits and acceptances are known, count by count; and the same counts from a
// run and from the replay of its recorded trace.
#include "harness/engine_coverage.h"

#include "harness/library.h"
#include "harness/replay.h"
#include "harness/simulate.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

namespace mc::harness {
namespace {

using Counts = std::map<std::string, std::int64_t>;
using F = model::CoverageFeatureId;

ReplayResult replay_scenario(const std::string& name) {
  const ReplayResult r = replay_file(default_library_dir() / (name + ".jsonl"), ReplayOptions{});
  EXPECT_TRUE(r.held()) << r.summary();
  return r;
}

// The features of `counts` that are not 0.
Counts reached(const model::Coverage& c) {
  Counts out;
  for (const auto& [name, n] : c.counts)
    if (n > 0) out[name] = n;
  return out;
}

std::int64_t launches(const model::Coverage& c) {
  std::int64_t n = 0;
  for (const auto& [name, count] : c.counts)
    if (name.starts_with("launch-")) n += count;
  return n;
}

// Two resets force-preempt the running requests (never listed as preempted); each comes back
// resumed. The counts of the trace's steps, tallied by hand from its lines.
TEST(EngineCoverage, StaleIndexAfterResetCountsEveryResetAndForcedResume) {
  const ReplayResult r = replay_scenario("a-stale-index-after-reset");
  const model::Coverage& c = r.coverage;
  EXPECT_EQ(c.count(F::reset), 2);
  EXPECT_EQ(c.count(F::preemption), 0);
  EXPECT_EQ(c.count(F::resume_after_reset), 6);
  EXPECT_EQ(c.count(F::resume_after_accepted_drafts), 3);
  EXPECT_EQ(c.count(F::resume_without_accepted_drafts), 3);
  EXPECT_EQ(c.count(F::prefix_hit_none), 9);
  EXPECT_EQ(c.count(F::prefill_crosses_0), 6);
  EXPECT_EQ(c.count(F::prefill_crosses_1), 3);
  EXPECT_EQ(c.count(F::prefill_crosses_several), 15);
  EXPECT_EQ(c.count(F::decode_crosses_none_accepted), 1);
  EXPECT_EQ(c.count(F::decode_crosses_some_accepted), 7);
  EXPECT_EQ(c.count(F::decode_crosses_all_accepted), 12);
  EXPECT_EQ(c.decode_crossings_by_accepted,
            (std::map<std::int32_t, std::int64_t>{{1, 1}, {2, 7}, {3, 12}}));
  EXPECT_EQ(c.count(F::abort), 0);
  EXPECT_EQ(c.count(F::v2_slot_reuse), 0); // a V1 trace
  EXPECT_EQ(launches(c), r.stats.launches);
}

// A small pool preempts decoding requests; they resume, most from a prefix hit of several
// blocks, one after a decode that accepted drafts.
TEST(EngineCoverage, AcceptedAfterPreemptionCountsPreemptionsResumesAndHits) {
  const ReplayResult r = replay_scenario("a-accepted-after-preemption");
  const model::Coverage& c = r.coverage;
  EXPECT_EQ(c.count(F::preemption), 13);
  EXPECT_EQ(c.count(F::preemption), r.stats.preemptions);
  EXPECT_EQ(c.count(F::resume_after_accepted_drafts), 1);
  EXPECT_EQ(c.count(F::resume_without_accepted_drafts), 11);
  EXPECT_EQ(c.count(F::resume_after_reset), 0);
  EXPECT_EQ(c.count(F::prefix_hit_none), 11);
  EXPECT_EQ(c.count(F::prefix_hit_1_block), 0);
  EXPECT_EQ(c.count(F::prefix_hit_several_blocks), 12);
  EXPECT_EQ(c.count(F::prefix_hit_several_blocks) + c.count(F::prefix_hit_1_block),
            r.stats.prefix_hits);
  EXPECT_EQ(c.count(F::decode_crosses_none_accepted), 7);
  EXPECT_EQ(c.count(F::decode_crosses_some_accepted), 11);
  EXPECT_EQ(c.count(F::decode_crosses_all_accepted), 16);
  EXPECT_EQ(c.count(F::launch_preprocess_align), c.count(F::launch_postprocess_align));
  EXPECT_EQ(c.count(F::launch_postprocess), 0); // V2
  EXPECT_EQ(launches(c), r.stats.launches);
}

// Eight requests through fewer slots: each slot a finished request frees is taken by a later one.
TEST(EngineCoverage, V2SlotReuseIsCountedFromTheLaunchedSlots) {
  const ReplayResult r = replay_scenario("g-v2-slot-reuse");
  EXPECT_EQ(r.coverage.count(F::v2_slot_reuse), 6);
  EXPECT_EQ(r.coverage.count(F::prefix_hit_none), 8);
}

// The same V2 trace with the copy kernels finding tables by slot (#55506) and the postprocess
// deferred: it holds, the same launches run under the other kinds' names, and every deferred
// postprocess of two or more rows counts as reordered.
TEST(EngineCoverage, SlotTablesAndDeferredPostprocessAreCounted) {
  const ReplayResult plain = replay_scenario("g-v2-slot-reuse");
  ReplayOptions o;
  o.v2_table_rows = model::V2TableRows::slot;
  o.deferred_postprocess = true;
  const ReplayResult r = replay_file(default_library_dir() / "g-v2-slot-reuse.jsonl", o);
  ASSERT_TRUE(r.held()) << r.summary();
  const model::Coverage& c = r.coverage;
  EXPECT_EQ(c.count(F::launch_postprocess_align), 0);
  EXPECT_EQ(c.count(F::launch_precopy), 0);
  EXPECT_EQ(c.count(F::launch_postprocess_align_slot_tables),
            plain.coverage.count(F::launch_postprocess_align));
  EXPECT_EQ(c.count(F::launch_precopy_slot_tables), plain.coverage.count(F::launch_precopy));
  EXPECT_GT(c.count(F::launch_postprocess_align_slot_tables), 0);
  EXPECT_GT(c.count(F::deferred_postprocess_reordered), 0);
  EXPECT_LE(c.count(F::deferred_postprocess_reordered),
            c.count(F::launch_postprocess_align_slot_tables));
  EXPECT_EQ(plain.coverage.count(F::deferred_postprocess_reordered), 0);
  EXPECT_EQ(plain.coverage.count(F::slot_table_row), 0);
  EXPECT_EQ(c.count(F::copy), plain.coverage.count(F::copy)); // the same copies, found by slot
}

// A V1 trace on vLLM's fused V1 path: one precopy_v1 launch per step with rows, whether or not
// a row copies, and the same copies as the identity-mapped precopy.
TEST(EngineCoverage, PrecopyV1LaunchesEveryStepWithRows) {
  const ReplayResult plain = replay_scenario("a-stale-index-after-reset");
  ReplayOptions o;
  o.v1_copy_path = model::V1CopyPath::precopy_v1;
  const ReplayResult r = replay_file(default_library_dir() / "a-stale-index-after-reset.jsonl", o);
  ASSERT_TRUE(r.held()) << r.summary();
  EXPECT_EQ(r.coverage.count(F::launch_precopy), 0);
  EXPECT_GT(r.coverage.count(F::launch_precopy_v1), plain.coverage.count(F::launch_precopy));
  EXPECT_EQ(r.coverage.count(F::copy), plain.coverage.count(F::copy));
  EXPECT_EQ(r.coverage.count(F::launch_postprocess), plain.coverage.count(F::launch_postprocess));
}

TEST(EngineCoverage, AllModeChunksStartingMidBlockAreCounted) {
  const ReplayResult r = replay_scenario("h-all-mode-prefill");
  EXPECT_GT(r.coverage.count(F::all_mode_chunk_mid_block), 0);
  EXPECT_EQ(r.coverage.count(F::launch_precopy) + r.coverage.count(F::launch_postprocess), 0);
}

// All mode with two drafts: 20 decodes, 17 of them full (three near their request's end carry
// none: all mode gives a decode all its drafts or none); decodes crossing a boundary with 1, 2
// and 3 accepted tokens; d's prefix hit of 12 tokens ends in a block one of a's decodes filled.
TEST(EngineCoverage, AllModeDraftsCountsRecordsAndCrossings) {
  const ReplayResult r = replay_scenario("a-all-mode-drafts");
  const model::Coverage& c = r.coverage;
  EXPECT_EQ(c.count(F::all_mode_decode), 20);
  EXPECT_EQ(c.count(F::all_mode_record), 17);
  EXPECT_EQ(c.count(F::decode_crosses_none_accepted), 1);
  EXPECT_EQ(c.count(F::decode_crosses_some_accepted), 3);
  EXPECT_EQ(c.count(F::decode_crosses_all_accepted), 5);
  EXPECT_EQ(c.decode_crossings_by_accepted,
            (std::map<std::int32_t, std::int64_t>{{1, 1}, {2, 3}, {3, 5}}));
  EXPECT_EQ(c.count(F::prefix_hit_none), 3);
  EXPECT_EQ(c.count(F::prefix_hit_several_blocks), 1);
  EXPECT_EQ(launches(c), 0); // all mode launches nothing
}

// What a run counts is what the replay of its trace counts, except aborts: the run knows them
// from its scheduler, the trace only when the aborted request was waiting.
TEST(EngineCoverage, RunAndReplayOfItsTraceCountTheSame) {
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() / "mc_engine_coverage_run.jsonl";
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  SimulationOptions o{.config = preset.config, .spec = preset.spec, .preset = "tiny-mamba2"};
  o.config.runner = model::RunnerFlavour::v2;
  o.engine.runner.flavour = model::RunnerFlavour::v2;
  o.spec.num_blocks = 12;
  o.num_steps = 300;
  o.num_requests = 24;
  o.seed = 3;
  o.engine.scheduler.reset_prefix_cache_per_million = 20'000;
  o.record = trace;
  const SimulationResult run = simulate(o);
  ASSERT_TRUE(run.held());
  const ReplayResult replayed = replay_file(trace, ReplayOptions{});
  ASSERT_TRUE(replayed.held()) << replayed.summary();
  EXPECT_EQ(reached(run.coverage), reached(replayed.coverage));
  EXPECT_GT(run.coverage.count(F::preemption), 0);
  EXPECT_GT(run.coverage.count(F::reset), 0);
  EXPECT_GT(run.coverage.count(F::v2_slot_reuse), 0);
  EXPECT_EQ(run.coverage.count(F::preemption), run.report.preemptions);
  EXPECT_EQ(run.coverage.count(F::reset), run.report.resets);
  std::filesystem::remove(trace);
}

// The same with async scheduling: the replay's shadow block manager holds back exactly the
// frees the scheduler held back, every optimistic count and planned step shows alike, and a
// request that finishes while it waits, its row in flight when it was preempted, is no abort.
TEST(EngineCoverage, RunAndReplayOfAnAsyncTraceCountTheSame) {
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() / "mc_engine_coverage_async.jsonl";
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  SimulationOptions o{.config = preset.config, .spec = preset.spec, .preset = "tiny-mamba2"};
  o.spec.num_blocks = 16;
  o.num_steps = 300;
  o.num_requests = 24;
  o.seed = 3;
  o.engine.scheduler.reset_prefix_cache_per_million = 20'000;
  o.engine.scheduler.async_scheduling = true;
  o.record = trace;
  const SimulationResult run = simulate(o);
  ASSERT_TRUE(run.held());
  const ReplayResult replayed = replay_file(trace, ReplayOptions{});
  ASSERT_TRUE(replayed.held()) << replayed.summary();
  EXPECT_EQ(reached(run.coverage), reached(replayed.coverage));
  EXPECT_EQ(run.coverage.count(F::async_deferral), run.report.steps - 1);
  EXPECT_EQ(run.coverage.count(F::async_rollback), 151);
  EXPECT_EQ(run.coverage.count(F::async_held_free), 216);
  EXPECT_EQ(replayed.coverage.count(F::async_held_free), 216); // the shadow held back the same
  // Two requests preempted while their rows ran finished by those rows: no abort.
  EXPECT_EQ(run.coverage.count(F::abort), 0);
  EXPECT_EQ(run.coverage.count(F::preemption), run.report.preemptions);
  EXPECT_EQ(run.coverage.count(F::reset), run.report.resets);
  std::filesystem::remove(trace);
}

// A hit past every earlier prompt: a follow-up turn hitting states another request registered
// while it decoded, on steps written by hand.
model::Step admit(std::int64_t index, std::string id, std::vector<std::int32_t> prompt,
                  std::int32_t hit) {
  model::Step step{.index = index};
  step.new_requests.push_back({.req_id = id,
                               .prompt_token_ids = std::move(prompt),
                               .block_ids = {{1}},
                               .num_computed_tokens = hit});
  return step;
}

// Tokens base, base + 1, ... : `n` of them.
std::vector<std::int32_t> run_of(std::int32_t base, std::int32_t n) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i)
    tokens[static_cast<std::size_t>(i)] = base + i;
  return tokens;
}

std::vector<std::int32_t> concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(EngineCoverage, AHitPastEveryEarlierPromptIsAFollowUpHit) {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  const model::Layout layout = model::build_layout(p.config, p.spec);
  const std::int32_t B = layout.config.mamba_block_size;
  EngineCoverageCounter counter(layout, 0);
  const auto past = [&] { return counter.coverage().count(F::prefix_hit_past_prompts); };
  const std::vector<std::int32_t> first = run_of(1000, 2 * B + 1);
  counter.count(admit(0, "a", first, 0), {}, std::nullopt);
  // A prompt sharing a's first two blocks, hit at both: a's prompt holds them.
  counter.count(admit(1, "b", concat(run_of(1000, 2 * B), run_of(5000, 3)), 2 * B), {},
                std::nullopt);
  EXPECT_EQ(past(), 0);
  // a's prompt, then tokens no prompt holds (a's answer): a hit of three blocks reaches past.
  const std::vector<std::int32_t> next = concat(first, run_of(9000, 2 * B));
  counter.count(admit(2, "c", next, 3 * B), {}, std::nullopt);
  EXPECT_EQ(past(), 1);
  // The same prompt again: c's prompt holds those blocks now.
  counter.count(admit(3, "d", next, 3 * B), {}, std::nullopt);
  EXPECT_EQ(past(), 1);
  // A hit that is not a whole number of blocks, or longer than the prompt, counts nothing.
  counter.count(admit(4, "e", concat(first, run_of(7000, 3 * B)), 3 * B + 1), {}, std::nullopt);
  counter.count(admit(5, "f", run_of(8000, B), 4 * B), {}, std::nullopt);
  EXPECT_EQ(past(), 1);
}

// vLLM #50630's order: a caches its prefix, b (another chat) hits it, a's next turn hits it.
TEST(EngineCoverage, AFollowUpHittingWhatAnotherChatHitSinceIsABA) {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  const model::Layout layout = model::build_layout(p.config, p.spec);
  const std::int32_t B = layout.config.mamba_block_size;
  EngineCoverageCounter counter(layout, 0);
  const auto aba = [&] { return counter.coverage().count(F::prefix_hit_a_b_a); };
  const std::vector<std::int32_t> a = run_of(1000, 2 * B + 1);
  counter.count(admit(0, "a", a, 0), {}, std::nullopt);
  // a's next turn with no other hit between: a chat hitting its own prefix only.
  counter.count(admit(1, "a2", concat(a, run_of(9000, B)), 2 * B), {}, std::nullopt);
  EXPECT_EQ(aba(), 0);
  // b shares a's first block and hits it; b's own next turn is b's chat, not another's.
  const std::vector<std::int32_t> b = concat(run_of(1000, B), run_of(5000, B + 1));
  counter.count(admit(2, "b", b, B), {}, std::nullopt);
  counter.count(admit(3, "b2", concat(b, run_of(6000, 2)), B), {}, std::nullopt);
  EXPECT_EQ(aba(), 0) << "b's earlier turn came in after a2's chat's hit only";
  // a's third turn (a2's follow-up): b hit a's prefix after a2 came in.
  counter.count(admit(4, "a3", concat(concat(a, run_of(9000, B)), run_of(7000, 3)), 3 * B), {},
                std::nullopt);
  EXPECT_EQ(aba(), 1);
  // A follow-up without a hit, or a hit of no whole block, counts nothing.
  counter.count(admit(5, "a4", concat(a, run_of(4000, 2 * B)), 0), {}, std::nullopt);
  EXPECT_EQ(aba(), 1);
}

} // namespace
} // namespace mc::harness
