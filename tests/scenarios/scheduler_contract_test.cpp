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

} // namespace
} // namespace mc::scenarios
