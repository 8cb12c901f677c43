// Replay (harness/replay.h, oracle/engine/replay.h): a recorded run replays to the
// same result, clean and with a runner mutant; steps that contradict the past are findings;
// the reader's rules about counts refuse impossible steps; an imported workload
// (scenarios/workload_import.h) drives a run with prefix hits.
#include "harness/replay.h"
#include "harness/simulate.h"
#include "model/errors.h"
#include "model/presets.h"
#include "scenarios/trace.h"
#include "scenarios/workload_import.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mc::harness {
namespace {

std::filesystem::path temp_trace(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "mc_replay_test";
  std::filesystem::create_directories(dir);
  return dir / (name + "-" + std::to_string(::getpid()) + ".jsonl");
}

struct RecordCase {
  std::string name;
  std::string preset;
  model::RunnerFlavour runner;
  model::CacheMode mode;
  std::int64_t pool_blocks;
  oracle::engine::V1CopyPath path = oracle::engine::V1CopyPath::precopy;
  std::int32_t resets_per_million = 0;
};

SimulationOptions simulation(const RecordCase& c, std::uint64_t seed) {
  const model::Preset& preset = model::find_preset(c.preset);
  SimulationOptions s{.config = preset.config, .spec = preset.spec, .preset = c.preset};
  s.config.mode = c.mode;
  if (c.mode == model::CacheMode::all) {
    s.config.num_spec_tokens = 0;
    s.config.num_spec_blocks = 0;
  }
  s.spec.num_blocks = c.pool_blocks;
  s.engine.runner.flavour = c.runner;
  s.engine.runner.v1_copy_path = c.path;
  s.engine.scheduler.reset_prefix_cache_per_million = c.resets_per_million;
  s.engine.scheduler.abort_per_million = 20'000;
  s.num_steps = 400;
  s.num_requests = 40;
  s.seed = seed;
  return s;
}

class RecordReplay : public ::testing::TestWithParam<RecordCase> {};

// The trace of a run replays to the same result: clean runs hold with the same step count;
// a run with a runner mutant and its replay stop at the same step with the same difference.
TEST_P(RecordReplay, SameResult) {
  const RecordCase& c = GetParam();
  SimulationOptions s = simulation(c, 3);
  s.record = temp_trace(c.name);
  const SimulationResult run = simulate(s);
  ASSERT_TRUE(run.held()) << (run.mismatch ? run.mismatch->text : run.finding->message);
  ReplayOptions options{.v1_copy_path = c.path};
  const ReplayResult replay = replay_file(*s.record, options);
  EXPECT_TRUE(replay.held()) << replay.summary();
  EXPECT_EQ(replay.stats.steps, run.report.steps);
  EXPECT_EQ(replay.stats.request_steps, run.report.request_steps);
  EXPECT_EQ(replay.stats.preemptions, run.report.preemptions);
  EXPECT_EQ(replay.stats.resets, run.report.resets);
  EXPECT_EQ(replay.stats.launches, run.report.launches);
  EXPECT_EQ(replay.stats.copies_by_kind, run.report.copies_by_kind);
  EXPECT_EQ(replay.bytes_compared, run.bytes_compared);
  EXPECT_GT(run.report.steps, 20);
  if (c.resets_per_million > 0) {
    EXPECT_GT(replay.stats.resets, 0);
  }
  if (c.pool_blocks <= 12) {
    EXPECT_GT(replay.stats.preemptions, 0);
  }

  s.runner_mutant = gpu::engine::RunnerMutant::slot_reused_without_reset;
  const SimulationResult bad_run = simulate(s);
  options.runner_mutant = s.runner_mutant;
  const ReplayResult bad_replay = replay_file(*s.record, options);
  ASSERT_EQ(bad_run.mismatch.has_value(), bad_replay.mismatch.has_value());
  if (bad_run.mismatch) {
    EXPECT_EQ(bad_run.mismatch->text, bad_replay.mismatch->text);
    EXPECT_EQ(bad_run.mismatch->step, bad_replay.stop_step);
  }
  std::filesystem::remove(*s.record);
}

INSTANTIATE_TEST_SUITE_P(
    Runs, RecordReplay,
    ::testing::Values(
        RecordCase{"v1_precopy_small_pool", "tiny-mamba2", model::RunnerFlavour::v1,
                   model::CacheMode::align, 10},
        RecordCase{"v1_batch_copy_resets", "tiny-mamba2", model::RunnerFlavour::v1,
                   model::CacheMode::align, 16, oracle::engine::V1CopyPath::batch_copy, 30'000},
        RecordCase{"v2_small_pool_resets", "tiny-mamba2", model::RunnerFlavour::v2,
                   model::CacheMode::align, 12, oracle::engine::V1CopyPath::precopy, 30'000},
        RecordCase{"v2_gdn", "tiny-gdn", model::RunnerFlavour::v2, model::CacheMode::align, 12},
        RecordCase{"all_mode", "tiny-gdn", model::RunnerFlavour::v1, model::CacheMode::all, 24}),
    [](const ::testing::TestParamInfo<RecordCase>& p) { return p.param.name; });

// Replaying a recorded step changed so that it contradicts the past.
class Tampered : public ::testing::Test {
protected:
  void SetUp() override {
    SimulationOptions s = simulation(
        {"tampered", "tiny-mamba2", model::RunnerFlavour::v1, model::CacheMode::align, 32}, 9);
    s.num_steps = 12;
    s.record = temp_trace("tampered");
    ASSERT_TRUE(simulate(s).held());
    std::ifstream in(*s.record);
    for (std::string line; std::getline(in, line);)
      lines_.push_back(line);
    std::filesystem::remove(*s.record);
  }
  // Replays the trace with line `index` (0 = header) edited by `edit`.
  ReplayResult replay_with(std::size_t index, const std::function<void(std::string&)>& edit) {
    std::vector<std::string> lines = lines_;
    edit(lines.at(index));
    std::stringstream text;
    for (const std::string& l : lines)
      text << l << "\n";
    scenarios::TraceReader reader(text, "tampered.jsonl");
    return replay_trace(reader, {});
  }
  std::vector<std::string> lines_;
};

void replace_first(std::string& s, const std::string& from, const std::string& to) {
  const std::size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << s;
  s.replace(at, from.size(), to);
}

TEST_F(Tampered, ComputedCountThatDoesNotFollow) {
  // Find a step with a cached request and claim one more computed token.
  for (std::size_t i = 2; i < lines_.size(); ++i) {
    const std::size_t at = lines_[i].find("\"num_computed_tokens\":");
    if (at == std::string::npos || lines_[i].find("cached_requests") == std::string::npos) continue;
    const ReplayResult r = replay_with(i, [](std::string& line) {
      const std::size_t p = line.find("\"cached_requests\"");
      const std::size_t q = line.find("\"num_computed_tokens\":", p) + 22;
      const std::size_t e = line.find_first_of(",}", q);
      line.replace(q, e - q, std::to_string(std::stoi(line.substr(q, e - q)) + 1));
    });
    ASSERT_TRUE(r.finding.has_value()) << r.summary();
    EXPECT_EQ(r.finding->kind, oracle::engine::FindingKind::inconsistent_step);
    EXPECT_NE(r.finding->message.find("what the steps before it committed"), std::string::npos)
        << r.finding->message;
    EXPECT_EQ(r.stop_line, static_cast<std::int64_t>(i + 1));
    return;
  }
  FAIL() << "no step with a cached request";
}

TEST_F(Tampered, HeldBlockHandedOutAgain) {
  // Step 0 gives two new requests their first tables; the second gets the first's blocks.
  const ReplayResult r = replay_with(1, [](std::string& line) {
    const std::size_t a = line.find("\"block_ids\":[[") + 14;
    const std::size_t b = line.find("\"block_ids\":[[", a) + 14;
    ASSERT_NE(b, std::string::npos + 14) << line;
    const std::string first = line.substr(a, line.find(']', a) - a);
    line.replace(b, line.find(']', b) - b, first);
  });
  ASSERT_TRUE(r.finding.has_value()) << r.summary();
  EXPECT_EQ(r.finding->kind, oracle::engine::FindingKind::inconsistent_step);
  EXPECT_NE(r.finding->message.find("still held"), std::string::npos) << r.finding->message;
  EXPECT_EQ(r.stop_step, 0);
}

TEST_F(Tampered, AcceptedCountChanged) {
  // One more accepted draft than the drafts that agree with the truth: the next state the
  // oracle reads is not the ground truth, or the backend disagrees; either way not held.
  for (std::size_t i = 2; i < lines_.size(); ++i) {
    if (lines_[i].find("\"num_draft_tokens\":2") == std::string::npos) continue;
    if (lines_[i].find("\"num_accepted_tokens\"") != std::string::npos) continue; // a = 1 only
    const ReplayResult r = replay_with(i, [](std::string& line) {
      replace_first(line, "\"num_draft_tokens\":2,", "\"num_draft_tokens\":2,");
      const std::size_t p = line.find("\"num_draft_tokens\":2");
      const std::size_t close = line.find('}', p);
      line.insert(close, ",\"num_accepted_tokens\":3");
    });
    EXPECT_FALSE(r.held());
    return;
  }
  GTEST_SKIP() << "no decode with a = 1 and two drafts in the trace";
}

// The reader's rules about counts (FORMAT.md, Rules 8-10): each refused with line and field.
struct Bad {
  std::string step;
  std::string field;
  std::string reason_part;
};

TEST(ReaderCountRules, RefusedWithLineAndField) {
  const std::string header =
      R"({"format":"mambacheck-trace","version":1,"config":{"mamba_block_size":4,)"
      R"("attn_block_size":2,"num_spec_tokens":2,"num_spec_blocks":2,"mode":"align",)"
      R"("conv_layout":"SD","runner":"v1","tp_size":1},"layout":{"preset":"tiny-mamba2"}})";
  const std::string arrive =
      R"({"index":0,"new_requests":[{"req_id":"a","prompt_token_ids":[1,2,3,4,5],)"
      R"("block_ids":[[1,2,3]]}],"scheduled":[{"req_id":"a","num_scheduled_tokens":5,)"
      R"("token_ids":[1,2,3,4,5]}]})";
  const std::vector<Bad> bad = {
      {R"({"index":1,"cached_requests":[{"req_id":"a","num_computed_tokens":5}],)"
       R"("scheduled":[{"req_id":"a","num_scheduled_tokens":3,"num_draft_tokens":1,)"
       R"("token_ids":[6,7,8]}]})",
       "scheduled[0].num_draft_tokens", "drafts come only in a decode row"},
      {R"({"index":1,"new_requests":[{"req_id":"b","prompt_token_ids":[1,2],)"
       R"("block_ids":[[4,5,6]]}],"scheduled":[{"req_id":"b","num_scheduled_tokens":3,)"
       R"("token_ids":[1,2,3]}]})",
       "scheduled[0].num_scheduled_tokens", "past its 2-token prompt"},
      {R"({"index":1,"preempted_req_ids":["a"]})"
       "\n"
       R"({"index":2,"cached_requests":[{"req_id":"a","resumed":true,"new_block_ids":[[0,4,5,6]],)"
       R"("num_computed_tokens":3}],"scheduled":[{"req_id":"a","num_scheduled_tokens":2,)"
       R"("token_ids":[4,5]}]})",
       "cached_requests[0].num_computed_tokens", "not a multiple of mamba_block_size 4"},
      {R"({"index":1,"reset_prefix_cache":true,"new_requests":[{"req_id":"b",)"
       R"("prompt_token_ids":[1,2,3,4,5],"num_computed_tokens":4,"block_ids":[[7,8,9,10]]}],)"
       R"("scheduled":[{"req_id":"b","num_scheduled_tokens":1,"token_ids":[5]}]})",
       "new_requests[0].num_computed_tokens", "in the step that emptied the prefix cache"},
      {R"({"index":1,"cached_requests":[{"req_id":"a","num_computed_tokens":1073741824}],)"
       R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[6]}]})",
       "scheduled[0].num_scheduled_tokens", "past the longest sequence"},
  };
  for (const Bad& b : bad) {
    std::istringstream in(header + "\n" + arrive + "\n" + b.step + "\n");
    scenarios::TraceReader reader(in, "bad.jsonl");
    const int line = 3 + static_cast<int>(std::count(b.step.begin(), b.step.end(), '\n'));
    try {
      while (reader.next()) {
      }
      ADD_FAILURE() << "accepted: " << b.step;
    } catch (const model::InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(fmt::format("bad.jsonl:{}: {}: ", line, b.field), 0),
                0u)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(b.reason_part), std::string::npos) << e.what();
    }
  }
}

// Under async scheduling with a writer not ordered with the steps (V2's deferred postprocess),
// what the step in flight can still touch is each row's table from the column it reads on. A
// block below, retired while that step runs, may be hit at once; a block at or above it, freed
// with its request, may not be handed out. The steps of vLLM's KVCacheManager (upstream
// 6a391a9, all mode): r2's first chunk wrote the state after 4 tokens in block 21 (column 0);
// planning step 3 while step 2 runs r2 from 6 tokens (column 1 on), vLLM retires column 0 and
// r3, whose prompt shares those 4 tokens, hits block 21.
const std::string kRetiredHitTrace =
    R"({"format":"mambacheck-trace","version":4,"config":{"mamba_block_size":4,"attn_block_size":4,)"
    R"("num_spec_tokens":0,"num_spec_blocks":0,"mode":"all","conv_layout":"SD","runner":"v2","tp_si)"
    R"(ze":1},"layout":{"groups":[{"name":"conv","family":"short_conv","params":{"intermediate_size)"
    R"(":3,"conv_kernel":4},"num_layers":1,"conv_elem_size":2,"temporal_elem_size":2,"page_policy":)"
    R"("shared","page_align_bytes":1}],"num_blocks":31},"block_pool_sizes":[31],"derived_vocab_size)"
    R"(":32768,"async_scheduling":true,"scheduler":{"cache_registration":"at_schedule","attention_g)"
    R"(roups":1,"shared_pool":true}})"
    "\n"
    R"({"index":0,"new_requests":[{"req_id":"r0","prompt_token_ids":[53,24,11,48,53,60,6,31,52,58,3)"
    R"(6,28,2,30,47,17,57,36,7,23,56,5,30,6,42],"block_ids":[[6,7,8,9,10]],"attention_block_ids":[[)"
    R"(1,2,3,4,5]]}],"scheduled":[{"req_id":"r0","num_scheduled_tokens":18,"token_ids":[53,24,11,48)"
    R"(,53,60,6,31,52,58,36,28,2,30,47,17,57,36]}]})"
    "\n"
    R"({"index":1,"planned_during":0,"new_requests":[{"req_id":"r1","prompt_token_ids":[13,19,55,13)"
    R"(,32],"block_ids":[[17,18]],"attention_block_ids":[[15,16]]},{"req_id":"r2","prompt_token_ids)"
    R"(":[40,34,4,13,53,21,4,7,39,27,24,7,29,45,39,59,32,29,27,6,6,37,22],"block_ids":[[21,22]],"at)"
    R"(tention_block_ids":[[19,20]]}],"cached_requests":[{"req_id":"r0","new_block_ids":[[13,14]],")"
    R"(num_computed_tokens":18,"attention_block_ids":[[11,12]],"held_block_ids":[[6,7,8,9,10,13,14])"
    R"(]}],"scheduled":[{"req_id":"r0","num_scheduled_tokens":7,"token_ids":[7,23,56,5,30,6,42]},{")"
    R"(req_id":"r1","num_scheduled_tokens":5,"token_ids":[13,19,55,13,32]},{"req_id":"r2","num_sche)"
    R"(duled_tokens":6,"token_ids":[40,34,4,13,53,21]}]})"
    "\n"
    R"({"index":2,"planned_during":1,"cached_requests":[{"req_id":"r0","num_computed_tokens":25,"he)"
    R"(ld_block_ids":[[0,0,0,0,10,13,14]]},{"req_id":"r1","num_computed_tokens":5,"held_block_ids":)"
    R"([[17,18]]},{"req_id":"r2","new_block_ids":[[27,28,29,30]],"num_computed_tokens":6,"attention)"
    R"(_block_ids":[[23,24,25,26]],"held_block_ids":[[21,22,27,28,29,30]]}],"scheduled":[{"req_id":)"
    R"("r0","num_scheduled_tokens":1,"token_ids":[40]},{"req_id":"r1","num_scheduled_tokens":1,"tok)"
    R"(en_ids":[17]},{"req_id":"r2","num_scheduled_tokens":16,"token_ids":[4,7,39,27,24,7,29,45,39,)"
    R"(59,32,29,27,6,6,37]}]})"
    "\n"
    R"({"index":3,"planned_during":2,"new_requests":[{"req_id":"r3","prompt_token_ids":[40,34,4,13,)"
    R"(53],"num_computed_tokens":4,"block_ids":[[21,8]],"attention_block_ids":[[19,9]]}],"cached_re)"
    R"(quests":[{"req_id":"r0","num_computed_tokens":26,"held_block_ids":[[0,0,0,0,0,0,14]]},{"req_)"
    R"(id":"r2","num_computed_tokens":22,"held_block_ids":[[0,22,27,28,29,30]]}],"scheduled":[{"req)"
    R"(_id":"r0","num_scheduled_tokens":1,"token_ids":[22]},{"req_id":"r2","num_scheduled_tokens":1)"
    R"(,"token_ids":[22]},{"req_id":"r3","num_scheduled_tokens":1,"token_ids":[53]}]})"
    "\n";

ReplayResult replay_text(const std::string& text) {
  std::istringstream in(text);
  scenarios::TraceReader reader(in, "retired_hit.jsonl");
  return replay_trace(reader, {.v2_table_rows = model::V2TableRows::slot,
                               .deferred_postprocess = true});
}

TEST(InFlightHoldBack, ARetiredBlockBelowTheReadColumnIsHitAtOnce) {
  const ReplayResult r = replay_text(kRetiredHitTrace);
  EXPECT_TRUE(r.held()) << r.summary();
  EXPECT_EQ(r.stats.steps, 4);
  EXPECT_EQ(r.stats.prefix_hits, 1);
}

// Step 3 preempts r2 instead, and r3's fresh block is r2's block 27 (column 2, written by r2's
// row in flight); with `unordered_writer` the header says a writer not ordered with the steps.
std::string handed_out_in_flight(bool unordered_writer) {
  std::string text = kRetiredHitTrace;
  if (unordered_writer) {
    const std::string shared = R"("shared_pool":true)";
    const std::size_t at = text.find(shared);
    EXPECT_NE(at, std::string::npos);
    text.replace(at, shared.size(), R"("shared_pool":true,"unordered_writer":true)");
  }
  const std::size_t step3 = text.find(R"({"index":3)");
  EXPECT_NE(step3, std::string::npos);
  std::string line = text.substr(step3);
  line.pop_back(); // its newline
  nlohmann::json s = nlohmann::json::parse(line);
  s["preempted_req_ids"] = {"r2"};
  s["new_requests"][0]["block_ids"] = {{21, 27}};
  s["cached_requests"].erase(1);
  s["scheduled"].erase(1);
  return text.substr(0, step3) + s.dump() + "\n";
}

TEST(InFlightHoldBack, ABlockTheStepInFlightStillWritesIsNotHandedOut) {
  const ReplayResult r = replay_text(handed_out_in_flight(true));
  ASSERT_TRUE(r.finding.has_value()) << r.summary();
  EXPECT_EQ(r.finding->kind, oracle::engine::FindingKind::in_flight_block_reused);
  EXPECT_EQ(r.finding->step, 3);
  EXPECT_EQ(r.finding->req_id, "r3");
  EXPECT_EQ(r.finding->block_id, 27);
}

TEST(InFlightHoldBack, WithoutDraftsV2DefersNoPostprocessAndHoldsNothingBack) {
  // The same handout under V2's deferred postprocess alone: without drafts V2 runs no
  // postprocess, and the row in flight's kernels come before the next step's on the stream.
  const ReplayResult r = replay_text(handed_out_in_flight(false));
  EXPECT_TRUE(r.held()) << r.summary();
  EXPECT_EQ(r.stats.steps, 4);
}

// An imported workload drives the simulator, with prefix hits from shared hash ids.
TEST(WorkloadImport, DrivesARunWithPrefixHits) {
  std::ostringstream text;
  // Request 0's prompt is exactly the six shared blocks (24 tokens, B = 4): its prefill ends on
  // that boundary and caches it; the others share those blocks and add their own.
  for (int i = 0; i < 12; ++i)
    text << fmt::format(R"({{"timestamp": {}, "input_length": {}, "output_length": {}, )"
                        R"("hash_ids": [1, 2, 3, 4, 5, 6, {}]}})",
                        i * 250, i == 0 ? 24 : 26 + i % 3, 4 + i % 3, 100 + i)
         << "\n";
  std::istringstream in(text.str());
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  SimulationOptions s{.config = preset.config, .spec = preset.spec, .preset = "tiny-mamba2"};
  s.num_steps = 400;
  s.requests = scenarios::import_workload(in, "w.jsonl", {.step_ms = 100, .hash_block_tokens = 4});
  const SimulationResult r = simulate(s);
  EXPECT_TRUE(r.held()) << (r.mismatch ? r.mismatch->text : r.finding->message);
  EXPECT_EQ(r.report.requests, 12);
  EXPECT_EQ(r.report.finished, 12);
  EXPECT_GT(r.report.prefix_hits, 3);
}

} // namespace
} // namespace mc::harness
