// The header's `scheduler` (model/scheduler_contract.h): the same steps are judged by the
// contract their scheduler declares. B = 4, no drafts, one group; request a prefills 8 of its 9
// prompt tokens in step 0, then b, whose prompt shares a's first 8 tokens, arrives in step 1.
// - mambacheck's engine registers a's boundary block (after 8 tokens, column 1) after step 0:
//   b must take the 8-token hit, and a hit of 0 is one lost;
// - vLLM with EAGLE bounds the Mamba hit by the attention group's hit less its last block: the
//   attention hit is 8 (a's two blocks), less one block 4, where no Mamba boundary is cached:
//   b must take no hit, and the 8-token hit is too long.
#include "harness/replay.h"
#include "oracle/engine/finding.h"
#include "scenarios/trace.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace mc::scenarios {
namespace {

std::string header(const std::string& scheduler) {
  return R"({"format":"mambacheck-trace","version":4,)"
         R"("config":{"mamba_block_size":4,"attn_block_size":4,"num_spec_tokens":0,)"
         R"("num_spec_blocks":0,"mode":"align","conv_layout":"SD","runner":"v1","tp_size":1},)"
         R"("layout":{"preset":"tiny-mamba2","num_blocks":16})" +
         (scheduler.empty() ? std::string() : R"(,"scheduler":)" + scheduler) + "}\n";
}

// Step 1 admits b with a hit of `hit` tokens (0 or 8) and the table a block manager gives it.
std::string steps(int hit) {
  std::string s =
      R"({"index":0,"new_requests":[{"req_id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9],)"
      R"("block_ids":[[0,1]]}],"scheduled":[{"req_id":"a","num_scheduled_tokens":8,)"
      R"("token_ids":[1,2,3,4,5,6,7,8]}]})"
      "\n";
  const std::string b_table = hit == 8 ? "[[0,1,3]]" : "[[0,0,3]]";
  const std::string b_tokens = hit == 8 ? "[50]" : "[1,2,3,4,5,6,7,8,50]";
  s += R"({"index":1,"new_requests":[{"req_id":"b","prompt_token_ids":[1,2,3,4,5,6,7,8,50],)"
       R"("num_computed_tokens":)" +
       std::to_string(hit) + R"(,"block_ids":)" + b_table +
       R"(}],"cached_requests":[{"req_id":"a","new_block_ids":[[2]],"num_computed_tokens":8}],)"
       R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[9]},)"
       R"({"req_id":"b","num_scheduled_tokens":)" +
       std::to_string(hit == 8 ? 1 : 9) + R"(,"token_ids":)" + b_tokens + "}]}\n";
  return s;
}

harness::ReplayResult replay(const std::string& scheduler, int hit) {
  std::istringstream in(header(scheduler) + steps(hit));
  TraceReader reader(in, "contract.jsonl");
  return harness::replay_trace(reader, {});
}

TEST(SchedulerContract, OwnEngineTakesTheLongestHit) {
  EXPECT_TRUE(replay("", 8).held()) << replay("", 8).summary();
  const harness::ReplayResult lost = replay("", 0);
  ASSERT_TRUE(lost.finding.has_value()) << lost.summary();
  EXPECT_EQ(lost.finding->kind, oracle::engine::FindingKind::wrong_prefix_hit);
  EXPECT_NE(lost.finding->message.find("shorter than the longest cached block-aligned prefix of "
                                       "8 tokens"),
            std::string::npos)
      << lost.finding->message;
}

TEST(SchedulerContract, VllmWithoutEagleRegistersAtScheduleAndTakesTheLongestHit) {
  const std::string vllm = R"({"cache_registration":"at_schedule"})";
  EXPECT_TRUE(replay(vllm, 8).held()) << replay(vllm, 8).summary();
  EXPECT_FALSE(replay(vllm, 0).held());
}

TEST(SchedulerContract, EagleDropsTheAttentionHitsLastBlock) {
  const std::string eagle = R"({"cache_registration":"at_schedule","eagle":true})";
  EXPECT_TRUE(replay(eagle, 0).held()) << replay(eagle, 0).summary();
  const harness::ReplayResult longer = replay(eagle, 8);
  ASSERT_TRUE(longer.finding.has_value()) << longer.summary();
  EXPECT_EQ(longer.finding->kind, oracle::engine::FindingKind::wrong_prefix_hit);
  EXPECT_NE(longer.finding->message.find("takes a prefix hit of 8 tokens (2 blocks of 4), longer "
                                         "than the longest cached block-aligned prefix of 0"),
            std::string::npos)
      << longer.finding->message;
}

// One attention group shares the pool with the Mamba group (B = 4, 16 blocks). a prefills 8 of
// its 9 tokens (Mamba block 1 holds the state after 8; attention blocks 2 and 3 hold tokens
// 0..7), runs its 9th and finishes; then c's attention allocation takes block 1, which evicts
// a's cached Mamba state; b, sharing a's first 8 tokens, can then hit nothing: the attention
// hit is 8, but no Mamba boundary at or below it is cached any more.
std::string shared_pool_trace(bool with_attention) {
  const auto attention = [with_attention](const char* ids) {
    return with_attention ? std::string(R"(,"attention_block_ids":)") + ids : std::string();
  };
  std::string t =
      R"({"format":"mambacheck-trace","version":4,)"
      R"("config":{"mamba_block_size":4,"attn_block_size":4,"num_spec_tokens":0,)"
      R"("num_spec_blocks":0,"mode":"align","conv_layout":"SD","runner":"v1","tp_size":1},)"
      R"("layout":{"preset":"tiny-mamba2","num_blocks":16},"scheduler":{)"
      R"("cache_registration":"at_schedule")" +
      std::string(with_attention ? R"(,"attention_groups":1,"shared_pool":true)" : "") + "}}\n";
  t += R"({"index":0,"new_requests":[{"req_id":"a","prompt_token_ids":[1,2,3,4,5,6,7,8,9],)"
       R"("block_ids":[[0,1]])" +
       attention("[[2,3]]") +
       R"(}],"scheduled":[{"req_id":"a","num_scheduled_tokens":8,"token_ids":[1,2,3,4,5,6,7,8]}]})"
       "\n";
  t += R"({"index":1,"cached_requests":[{"req_id":"a","new_block_ids":[[4]],)"
       R"("num_computed_tokens":8)" +
       attention("[[5]]") +
       R"(}],"scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[9]}]})"
       "\n";
  t += R"({"index":2,"finished_req_ids":["a"],"new_requests":[{"req_id":"c",)"
       R"("prompt_token_ids":[20,21,22,23,24,25,26,27,28],"block_ids":[[0,0,8]])" +
       attention("[[1,6,7]]") +
       R"(}],"scheduled":[{"req_id":"c","num_scheduled_tokens":9,)"
       R"("token_ids":[20,21,22,23,24,25,26,27,28]}]})"
       "\n";
  t += R"({"index":3,"new_requests":[{"req_id":"b","prompt_token_ids":[1,2,3,4,5,6,7,8,50],)"
       R"("block_ids":[[0,0,9]])" +
       attention("[[10,11,12]]") +
       R"(}],"cached_requests":[{"req_id":"c","num_computed_tokens":9}],)"
       R"("scheduled":[{"req_id":"c","num_scheduled_tokens":1,"token_ids":[29]},)"
       R"({"req_id":"b","num_scheduled_tokens":9,"token_ids":[1,2,3,4,5,6,7,8,50]}]})"
       "\n";
  return t;
}

harness::ReplayResult replay_text(const std::string& text) {
  std::istringstream in(text);
  TraceReader reader(in, "shared.jsonl");
  return harness::replay_trace(reader, {});
}

TEST(SchedulerContract, AnAttentionAllocationEvictsACachedMambaStateOfTheSharedPool) {
  const harness::ReplayResult shared = replay_text(shared_pool_trace(true));
  EXPECT_TRUE(shared.held()) << shared.summary();
  // Without the attention tables the eviction is invisible: the hit looks lost.
  const harness::ReplayResult blind = replay_text(shared_pool_trace(false));
  ASSERT_TRUE(blind.finding.has_value()) << blind.summary();
  EXPECT_EQ(blind.finding->kind, oracle::engine::FindingKind::wrong_prefix_hit);
  EXPECT_EQ(blind.stop_step, 3);
}

TEST(SchedulerContract, ABlockTakenForAttentionWhileAMambaGroupHoldsItIsAFinding) {
  std::string t = shared_pool_trace(true);
  // c's attention allocation takes block 4, a's running Mamba block, before a finished.
  const std::string finish = R"("finished_req_ids":["a"],)";
  t.replace(t.find(finish), finish.size(), "");
  t.replace(t.find("[[1,6,7]]"), 9, "[[4,6,7]]");
  const harness::ReplayResult r = replay_text(t);
  ASSERT_TRUE(r.finding.has_value()) << r.summary();
  EXPECT_EQ(r.finding->kind, oracle::engine::FindingKind::inconsistent_step);
  EXPECT_NE(r.finding->message.find("takes block 4 for an attention group while mamba group 0 "
                                    "holds it"),
            std::string::npos)
      << r.finding->message;
}

// vLLM's pad_spec_decode: a 1-token prompt scheduled as 1 + 2 tokens, its two placeholder
// drafts rejected; the next step decodes from the state after the real token alone.
TEST(SchedulerContract, APaddedPromptTailIsAcceptedAndJudgedByItsRealToken) {
  const std::string header =
      R"({"format":"mambacheck-trace","version":4,)"
      R"("config":{"mamba_block_size":4,"attn_block_size":4,"num_spec_tokens":2,)"
      R"("num_spec_blocks":2,"mode":"align","conv_layout":"SD","runner":"v1","tp_size":1},)"
      R"("layout":{"preset":"tiny-mamba2","num_blocks":16},)"
      R"("scheduler":{"cache_registration":"at_schedule"}})"
      "\n";
  const std::string padded =
      R"({"index":0,"new_requests":[{"req_id":"a","prompt_token_ids":[7],)"
      R"("block_ids":[[1,2,3]]}],"scheduled":[{"req_id":"a","num_scheduled_tokens":3,)"
      R"("num_draft_tokens":2,"token_ids":[7,100,100],"num_accepted_tokens":1}]})"
      "\n";
  const std::string next = R"({"index":1,"cached_requests":[{"req_id":"a","num_computed_tokens":1}],)"
                           R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,)"
                           R"("token_ids":[8]}]})"
                           "\n";
  const harness::ReplayResult r = replay_text(header + padded + next);
  EXPECT_TRUE(r.held()) << r.summary();
  EXPECT_EQ(r.stats.steps, 2);
  // Known tokens past the prompt (no drafts to be the padding): refused as a bad file.
  std::string bad = padded;
  const std::string row = R"("num_scheduled_tokens":3,"num_draft_tokens":2,"token_ids":[7,100,100])";
  bad.replace(bad.find(row), row.size(), R"("num_scheduled_tokens":2,"token_ids":[7,100])");
  try {
    replay_text(header + bad + next);
    ADD_FAILURE() << "accepted";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a new request schedules positions 0..1, past its "
                                         "1-token prompt"),
              std::string::npos)
        << e.what();
  }
}

// A recorded table the manager holds (held_block_ids): p caches the state after 4 tokens in
// block 1; a starts with that 4-token hit (block 1 at column 0), prefills to 12 (running block 3 at column 2, column 1 null); once 12 tokens are
// committed the hit block is stale, and a manager that still holds it leaks it (vLLM #55450:
// its retirement walked down from column 1, met the null and stopped).
std::string retention_trace(const std::string& held) {
  return std::string(R"({"format":"mambacheck-trace","version":4,)"
                     R"("config":{"mamba_block_size":4,"attn_block_size":4,"num_spec_tokens":0,)"
                     R"("num_spec_blocks":0,"mode":"align","conv_layout":"SD","runner":"v1",)"
                     R"("tp_size":1},"layout":{"preset":"tiny-mamba2","num_blocks":16},)"
                     R"("scheduler":{"cache_registration":"at_schedule"}})"
                     "\n") +
         R"({"index":0,"new_requests":[{"req_id":"p","prompt_token_ids":[1,2,3,4,5],)"
         R"("block_ids":[[1]]}],"scheduled":[{"req_id":"p","num_scheduled_tokens":4,)"
         R"("token_ids":[1,2,3,4]}]})"
         "\n"
         R"({"index":1,"new_requests":[{"req_id":"a","prompt_token_ids":[1,2,3,4,6,7,8,9,10,11,12,13,14],)"
         R"("num_computed_tokens":4,"block_ids":[[1,0,3]]}],"cached_requests":[{"req_id":"p",)"
         R"("new_block_ids":[[2]],"num_computed_tokens":4}],"scheduled":[{"req_id":"p","num_scheduled_tokens":1,)"
         R"("token_ids":[5]},{"req_id":"a","num_scheduled_tokens":8,)"
         R"("token_ids":[6,7,8,9,10,11,12,13]}]})"
         "\n"
         R"({"index":2,"cached_requests":[{"req_id":"a","num_computed_tokens":12,)"
         R"("new_block_ids":[[4]],"held_block_ids":)" +
         held +
         R"(}],"scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[14]}]})"
         "\n";
}

TEST(SchedulerContract, AStaleBlockTheManagerStillHoldsIsExcessRetention) {
  const harness::ReplayResult freed = replay_text(retention_trace("[[0,0,3,4]]"));
  EXPECT_TRUE(freed.held()) << freed.summary();
  const harness::ReplayResult leaked = replay_text(retention_trace("[[1,0,3,4]]"));
  ASSERT_TRUE(leaked.finding.has_value()) << leaked.summary();
  EXPECT_EQ(leaked.finding->kind, oracle::engine::FindingKind::excess_retention);
  EXPECT_EQ(leaked.stop_step, 2);
  EXPECT_NE(leaked.finding->message.find("group 0 still holds block 1 at column 0 (1 block below "
                                         "column 2), though 12 tokens were committed"),
            std::string::npos)
      << leaked.finding->message;
  EXPECT_NE(leaked.finding->message.find("(vLLM #55450)"), std::string::npos);
}

} // namespace
} // namespace mc::scenarios
