// The engine-level fuzz (fuzz/engine/engine_fuzz.h) and the runner mutant catalogue
// (gpu/engine/runner_mutant.h): every runner mutant is killed at a fixed seed within a bounded
// number of cases, with a shrunk counterexample of at most 8 steps and 3 requests whose trace
// reads back; clean runs hold; the shrinker never returns a passing case; the same seed gives
// the same report.
#include "fuzz/engine/engine_fuzz.h"
#include "scenarios/trace.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <set>

namespace mc::fuzz {
namespace {

// A campaign's JSON report.
nlohmann::json report_of(const CampaignOptions& o, const EngineLevelOptions& e) {
  EngineLevel level(o, e);
  return to_json(o, level, run_campaign(o, level));
}

using gpu::engine::RunnerMutant;

TEST(RunnerMutantCatalogue, NamesAreUniqueAndRoundTrip) {
  const auto mutants = gpu::runner_mutants();
  EXPECT_GE(mutants.size(), 8u);
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < mutants.size(); ++i) {
    const auto m = static_cast<RunnerMutant>(i + 1);
    EXPECT_EQ(gpu::engine::to_string(m), mutants[i].name);
    EXPECT_EQ(gpu::engine::find_runner_mutant(mutants[i].name), m);
    EXPECT_NE(std::string_view("ABCDEFGHX").find(mutants[i].bug_class), std::string_view::npos);
    EXPECT_FALSE(mutants[i].description.empty());
    EXPECT_TRUE(names.insert(mutants[i].name).second) << mutants[i].name;
    EXPECT_FALSE(gpu::find_kernel_mutant(mutants[i].name).has_value()) << mutants[i].name;
  }
  EXPECT_EQ(gpu::engine::to_string(RunnerMutant::none), "none");
  EXPECT_EQ(gpu::engine::find_runner_mutant("none"), RunnerMutant::none);
  EXPECT_FALSE(gpu::engine::find_runner_mutant("no_such_mutant").has_value());
}

TEST(EngineFuzz, CleanRunsHold) {
  model::testing::TempDir dir;
  CampaignOptions o{.seed = 1, .cases_max = 60, .max_size = 30, .out_dir = dir.path(), .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{};
  const CampaignReport r = run_engine_fuzz(o, e);
  ASSERT_TRUE(r.findings.empty()) << r.findings.front().failure;
  EXPECT_EQ(r.cases, 60);
  EXPECT_GT(r.total("steps"), 60 * 5);
  EXPECT_GT(r.total("bytes_compared"), 0);
  EXPECT_GE(r.cases_by.at("runner").size(), 3u); // v1 precopy, v1 batch_copy, v2, all
  EXPECT_GE(r.cases_by.at("preset").size(), 5u);
}

TEST(EngineFuzz, GeneratorIsDeterministicAndValid) {
  for (std::uint64_t seed = 100; seed < 160; ++seed) {
    const int size = static_cast<int>(seed % 101);
    const EngineCase a = generate_engine_case(seed, size);
    const EngineCase b = generate_engine_case(seed, size);
    EXPECT_EQ(to_json(a).dump(), to_json(b).dump());
    EXPECT_EQ(a.case_seed, seed);
    EXPECT_LE(a.requests.size(), 3u + static_cast<std::size_t>(size * size / 80));
  }
}

// A hash unit below the block size (partial-hash hits) in about a third of the align cases
// without an EAGLE drafter from size 40 on, always a proper divisor of the block size; none
// below that size, so the seeds of small campaigns keep their cases.
TEST(EngineFuzz, SomeAlignCasesHashInUnitsBelowTheBlockSize) {
  int drawn = 0;
  int eligible = 0;
  for (std::uint64_t seed = 1; seed <= 600; ++seed) {
    const EngineCase c = generate_engine_case(seed, 40 + static_cast<int>(seed % 61));
    const std::int32_t B = c.config.mamba_block_size;
    const std::int32_t unit = c.engine.scheduler.hash_block_size;
    const bool align = c.config.mode == model::CacheMode::align;
    if (align && B >= 2 && !c.engine.scheduler.drafter_prunes_last_block) ++eligible;
    if (unit == 0) continue;
    ++drawn;
    EXPECT_TRUE(align) << "seed " << seed;
    EXPECT_FALSE(c.engine.scheduler.drafter_prunes_last_block) << "seed " << seed;
    EXPECT_LT(unit, B) << "seed " << seed;
    EXPECT_EQ(B % unit, 0) << "seed " << seed;
  }
  EXPECT_GE(drawn, eligible / 5);
  EXPECT_LE(drawn, eligible / 2);
  for (std::uint64_t seed = 1; seed <= 300; ++seed)
    EXPECT_EQ(
        generate_engine_case(seed, static_cast<int>(seed % 40)).engine.scheduler.hash_block_size, 0)
        << "seed " << seed;
}

// Seed 91 at size 91 drew a 64-layer family that also needed its drafts turned off: the layer
// cuts used up the generator's attempts and it aborted. Every seed of a campaign must give a
// case (the generator aborts otherwise, so reaching the end is the check).
TEST(EngineFuzz, GeneratorGivesACaseForEverySeed) {
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const int size = static_cast<int>(seed % 101);
    const EngineCase c = generate_engine_case(seed, size);
    EXPECT_GE(c.requests.size(), 1u) << "seed " << seed;
  }
}

// From size 40 up, about one case in six runs at production sizes: B of 256..2048, prompts up
// to 16k tokens; smaller sizes never do, so the seeds of small campaigns keep their cases.
TEST(EngineFuzz, SomeCasesAreAtProductionSizes) {
  int production = 0;
  int long_prompts = 0;
  for (std::uint64_t seed = 1; seed <= 600; ++seed) {
    const int size = 40 + static_cast<int>(seed % 61);
    const EngineCase c = generate_engine_case(seed, size);
    if (c.config.mamba_block_size < 256) continue;
    ++production;
    for (const oracle::engine::RequestSpec& r : c.requests) {
      EXPECT_LE(r.num_prompt_tokens, 16384) << "seed " << seed;
      if (r.num_prompt_tokens > c.config.mamba_block_size) ++long_prompts;
    }
  }
  EXPECT_GE(production, 60);
  EXPECT_LE(production, 140);
  EXPECT_GT(long_prompts, production); // several prompts a case span blocks of B
  for (std::uint64_t seed = 1; seed <= 300; ++seed)
    EXPECT_LT(generate_engine_case(seed, static_cast<int>(seed % 40)).config.mamba_block_size, 256)
        << "seed " << seed;
}

struct KillCase {
  RunnerMutant mutant;
  std::uint64_t seed;
  int max_size;
  std::int64_t cases_max;
  std::int32_t requests_max = 3; // of the shrunk case
};

void PrintTo(const KillCase& k, std::ostream* os) {
  *os << gpu::engine::to_string(k.mutant) << " seed " << k.seed << " max size " << k.max_size
      << " cases " << k.cases_max;
}

class RunnerMutantKilled : public ::testing::TestWithParam<KillCase> {};

TEST_P(RunnerMutantKilled, ShrunkToAtMost8StepsAnd3Requests) {
  const KillCase& k = GetParam();
  model::testing::TempDir dir;
  CampaignOptions o{.seed = k.seed, .cases_max = k.cases_max, .max_size = k.max_size, .out_dir = dir.path(), .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{.run = {.runner_mutant = k.mutant}};
  const CampaignReport r = run_engine_fuzz(o, e);
  ASSERT_EQ(r.findings.size(), 1u)
      << gpu::engine::to_string(k.mutant) << " survived " << r.cases << " cases";
  const Finding& f = r.findings.front();
  // The host runner is deterministic: every rerun fails the same way.
  EXPECT_EQ(f.signature.classification, Classification::deterministic);
  EXPECT_EQ(f.runs.summary(), "failed 6 of 6 runs");
  ASSERT_NE(f.counterexample_as<EngineCounterexample>(), nullptr);
  const EngineCounterexample& cx = *f.counterexample_as<EngineCounterexample>();
  EXPECT_TRUE(cx.shrink_kept);
  EXPECT_EQ(cx.saved_runs.summary(), "failed 5 of 5 runs");
  EXPECT_LE(cx.steps, 8) << cx.failure << "\n" << cx.description;
  EXPECT_LE(cx.requests, k.requests_max) << cx.failure << "\n" << cx.description;
  // The shrunk case fails the same way when run again; the clean runner holds on it.
  const EngineOutcome again = run_engine_case(cx.shrunk, {.runner_mutant = k.mutant});
  ASSERT_TRUE(again.failed());
  EXPECT_EQ(again.failure->kind, cx.failure_kind);
  EXPECT_EQ(again.failure->text, cx.failure);
  EXPECT_FALSE(run_engine_case(cx.shrunk, {}).failed());
  // Both traces read back, the shrunk one with exactly the steps that fail.
  for (const auto& [trace, steps] :
       {std::pair{cx.shrunk_trace, cx.steps}, std::pair{cx.original_trace, cx.original_steps}}) {
    scenarios::TraceReader reader(trace);
    std::int64_t n = 0;
    while (reader.next())
      ++n;
    EXPECT_EQ(n, steps) << trace;
  }
  EXPECT_TRUE(std::filesystem::exists(cx.dir / "report.json"));
  EXPECT_TRUE(std::filesystem::exists(cx.dir / "report.txt"));
  EXPECT_NE(cx.reproduce.find("--mutant " + std::string(gpu::engine::to_string(k.mutant))),
            std::string::npos);
}

// Seeds and bounds found with `mambacheck fuzz --level engine --mutant NAME`: seed 1 kills ten
// of them within 25 cases at sizes up to 30; accepted_kept_across_preempt needs a preemption
// of a request with accepted drafts and a resume with a prefix hit, first met by case 343 of
// seed 1 at sizes up to 60 (run here as its own seed; case 167 met it until async cases
// stopped preempting for frees held back). The class H mutants need an all-mode
// case with a chunk that starts mid-block (and, for all_boundary_count_from_length, whose tail
// passes one more boundary than n // B counts): both are killed by case 30 of seed 1.
// all_record_after_any_step needs an all-mode case with drafts whose request decodes after a
// prefill: killed by case 44 of seed 1. The forward's mutants: forward_reads_column_a needs a
// decode with drafts enabled after a step that left its window (case 24 of seed 1);
// first_scheduled_block_off_by_one an all-mode step (case 2), spec_slice_wrong_start a decode
// whose last token closes a block (case 3), unbounded_accepted_read a decode without spec
// decode (case 3); padded_rows_stale_index a decode-only step padded for a CUDA graph after a
// larger one (case 29), which takes 4 requests at least: 4 decodes, then 3 padded to 4;
// graph_buffers_reallocated a second decode-only step of one batch size (case 2);
// block_copies_skipped the first case that hashes in units below the block size (drawn from
// size 40 on: case 46 of seed 1), whose first partial tail is copied away.
INSTANTIATE_TEST_SUITE_P(
    All, RunnerMutantKilled,
    ::testing::Values(KillCase{RunnerMutant::skip_cleanup_of_resumed, 1, 30, 40},
                      KillCase{RunnerMutant::v2_seed_with_attn_block_size, 1, 30, 40},
                      KillCase{RunnerMutant::v2_source_column_shifted, 1, 30, 40},
                      KillCase{RunnerMutant::accepted_kept_across_preempt, 343, 60, 1},
                      KillCase{RunnerMutant::slot_reused_without_reset, 1, 30, 40},
                      KillCase{RunnerMutant::prev_c_division, 1, 30, 40},
                      KillCase{RunnerMutant::curr_floor_division, 1, 30, 40},
                      KillCase{RunnerMutant::precopy_wrong_slot, 1, 30, 40},
                      KillCase{RunnerMutant::postprocess_skipped_no_drafts, 1, 30, 40},
                      KillCase{RunnerMutant::postprocess_reset_dropped, 1, 30, 40},
                      KillCase{RunnerMutant::resumed_computed_before_hit, 1, 30, 40},
                      KillCase{RunnerMutant::all_boundaries_from_chunk_start, 1, 30, 40},
                      KillCase{RunnerMutant::all_boundary_count_from_length, 1, 30, 40},
                      KillCase{RunnerMutant::all_record_after_any_step, 1, 30, 50},
                      KillCase{RunnerMutant::forward_reads_column_a, 1, 30, 40},
                      KillCase{RunnerMutant::first_scheduled_block_off_by_one, 1, 30, 40},
                      KillCase{RunnerMutant::spec_slice_wrong_start, 1, 30, 40},
                      KillCase{RunnerMutant::padded_rows_stale_index, 1, 30, 40, 4},
                      KillCase{RunnerMutant::unbounded_accepted_read, 1, 30, 40},
                      KillCase{RunnerMutant::block_copies_skipped, 1, 60, 50},
                      KillCase{RunnerMutant::graph_buffers_reallocated, 1, 30, 40}),
    [](const ::testing::TestParamInfo<KillCase>& param_info) {
      return std::string(gpu::engine::to_string(param_info.param.mutant));
    });

TEST(EngineFuzz, ShrinkerNeverReturnsAPassingCase) {
  // Shrink one failure under tight limits and under loose ones: both results still fail.
  const EngineRunOptions run{.runner_mutant = RunnerMutant::prev_c_division};
  for (std::uint64_t seed = 1; seed < 40; ++seed) {
    const EngineCase c = generate_engine_case(seed, static_cast<int>(seed % 31));
    const EngineOutcome o = run_engine_case(c, run);
    if (!o.failed()) continue;
    for (const std::int32_t limit : {1, 3, 2000}) {
      const ShrinkResult s = shrink_engine_case(c, o, run, {.candidates_max = limit});
      EXPECT_LE(s.tried, limit);
      const EngineOutcome again = run_engine_case(s.best, run);
      ASSERT_TRUE(again.failed());
      EXPECT_EQ(again.failure->kind, o.failure->kind);
      EXPECT_LE(s.outcome.steps_run, o.steps_run);
      EXPECT_LE(s.best.requests.size(), c.requests.size());
    }
    return;
  }
  FAIL() << "no failing case among 39 seeds";
}

// With keep_going the campaign runs every case: the first case of each signature is rerun,
// shrunk and saved in its own directory, and later cases of a known signature are counted.
TEST(EngineFuzz, KeepGoingCountsRepeatsOfASignature) {
  model::testing::TempDir dir;
  CampaignOptions o{.seed = 7, .cases_max = 40, .max_size = 30, .out_dir = dir.path(), .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{.run = {.runner_mutant = RunnerMutant::curr_floor_division}};
  o.keep_going = true;
  const CampaignReport r = run_engine_fuzz(o, e);
  EXPECT_EQ(r.cases, 40);
  ASSERT_FALSE(r.findings.empty());
  std::int64_t counted = 0;
  std::set<std::string> keys, dirs;
  for (const Finding& f : r.findings) {
    counted += f.cases;
    keys.insert(f.signature.key());
    const auto* cx = f.counterexample_as<EngineCounterexample>();
    ASSERT_NE(cx, nullptr);
    dirs.insert(cx->dir.string());
    EXPECT_TRUE(std::filesystem::exists(cx->shrunk_trace));
    EXPECT_EQ(f.signature.level, "engine");
  }
  EXPECT_EQ(keys.size(), r.findings.size());
  EXPECT_EQ(dirs.size(), r.findings.size());
  EXPECT_EQ(counted, r.failing_cases());
  EXPECT_GT(r.failing_cases(), static_cast<std::int64_t>(r.findings.size()));
  // Skipping every signature: the same cases fail, none counts against the campaign.
  for (const Finding& f : r.findings)
    o.skip_signatures.push_back(f.signature.to_string());
  const CampaignReport skipped = run_engine_fuzz(o, e);
  EXPECT_EQ(skipped.failing_cases(), r.failing_cases());
  EXPECT_EQ(skipped.first_failing(), nullptr);
}

// A kernel that reads a block-table row past the table's end kills an unisolated run; isolated,
// each case runs in a forked child: the crash is a finding at the step it reached, the
// campaign runs every case, and the shrunk trace still crashes the runner.
TEST(EngineFuzz, IsolatedCasesTurnACrashIntoAFinding) {
  model::testing::TempDir dir;
  CampaignOptions o{.seed = 1, .cases_max = 60, .max_size = 30, .out_dir = dir.path(), .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{.run = {.kernel_mutant = gpu::Mutant::table_row_from_slot}};
  o.isolate = true;
  o.keep_going = true;
  const CampaignReport r = run_engine_fuzz(o, e);
  EXPECT_EQ(r.cases, 60);
  const auto crash = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) {
    return f.signature.difference == "crash";
  });
  ASSERT_NE(crash, r.findings.end());
  EXPECT_EQ(crash->signature.classification, Classification::backend_error);
  // A fault is a SIGSEGV, or under AddressSanitizer its report of the overflow.
  EXPECT_TRUE(crash->failure.find("the backend crashed: killed by SIGSEGV") != std::string::npos ||
              crash->failure.find("AddressSanitizer") != std::string::npos)
      << crash->failure;
  ASSERT_NE(crash->counterexample_as<EngineCounterexample>(), nullptr);
  const EngineCounterexample& cx = *crash->counterexample_as<EngineCounterexample>();
  EXPECT_TRUE(std::filesystem::exists(cx.shrunk_trace));
  // What the kernel reads past the table is whatever lies there, which depends on the heap of
  // the process it runs in: here it may crash or read a wrong block, but every run fails.
  for (int run = 0; run < 6; ++run) {
    const EngineOutcome again = run_engine_case(
        cx.shrunk, {.kernel_mutant = gpu::Mutant::table_row_from_slot, .isolate = true});
    ASSERT_TRUE(again.failed());
  }
  EXPECT_FALSE(run_engine_case(cx.shrunk, {}).failed()); // the clean kernels hold on it
}

TEST(EngineFuzz, SameSeedSameReport) {
  model::testing::TempDir dir;
  CampaignOptions o{.seed = 7, .cases_max = 40, .max_size = 30, .out_dir = dir.path(), .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{.run = {.runner_mutant = RunnerMutant::curr_floor_division}};
  const std::string first = report_of(o, e).dump();
  const std::string second = report_of(o, e).dump();
  EXPECT_EQ(first, second);
  EXPECT_NE(first.find("\"counterexample\""), std::string::npos);
  o.cases_max = 10;
  EXPECT_EQ(report_of(o, {}).dump(), report_of(o, {}).dump());
}

// Coverage comes from what ran: the same seed counts the same, in this process or in forked
// children, and the report carries it.
TEST(EngineFuzz, SameSeedSameCoverageIsolatedOrNot) {
  CampaignOptions o{.seed = 1, .cases_max = 30, .max_size = 30, .out_dir = "", .shrink = kEngineShrinkLimits};
  const EngineLevelOptions e{};
  const CampaignReport here = run_engine_fuzz(o, e);
  o.isolate = true;
  const CampaignReport isolated = run_engine_fuzz(o, e);
  EXPECT_EQ(here.coverage.counts, isolated.coverage.counts);
  EXPECT_EQ(here.coverage.decode_crossings_by_accepted,
            isolated.coverage.decode_crossings_by_accepted);
  const std::int64_t decodes = here.coverage.count("decode-crosses-no-drafts") +
                               here.coverage.count("decode-crosses-none-accepted") +
                               here.coverage.count("decode-crosses-some-accepted") +
                               here.coverage.count("decode-crosses-all-accepted");
  std::int64_t by_accepted = 0;
  for (const auto& [a, n] : here.coverage.decode_crossings_by_accepted)
    by_accepted += n;
  EXPECT_EQ(decodes, by_accepted);
  EXPECT_EQ(here.coverage.count("preemption"), 11);
  EXPECT_EQ(here.coverage.count("prefix-hit-several-blocks"), 3);
  // The async cases among them: every step after the first planned during the one before.
  EXPECT_EQ(here.coverage.count("async-deferral"), 45);
  EXPECT_EQ(here.coverage.count("async-held-free"), 7);
  EXPECT_EQ(model::to_json(here.coverage)["counts"]["preemption"], 11);
}

} // namespace
} // namespace mc::fuzz
