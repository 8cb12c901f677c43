// Hand-derived engine walkthroughs on tiny-mamba2 (B = 4, two drafts, nsb = 2, V1, precopy),
// every table, copy pair and outcome worked out by hand from REFERENCE.md 2-4 and written
// here; the engine's own invariants run underneath and must stay silent.
//
// r0: prompt of 10 tokens, budget 8.
//   step 0: prefill chunk 8 (split at the boundary 8): table [0 1 2 3], running column 1,
//           no copy (fresh); the state after 8 tokens lands in block 1.
//   step 1: chunk 2: table grows by one block -> [0 1 2 3 4]; copy column 1 -> 2 (block
//           1 -> 2, bias 0); the prompt completes, one token is sampled (11 tokens).
//   step 2: decode with 2 drafts (13 tokens): block 1 is freed (index 1 < cdiv(10,4)-1),
//           the table grows -> [0 0 2 3 4 5]; copy column 2 -> 3 (block 2 -> 3); the forward
//           writes the states after 11, 12, 13 tokens to blocks 3, 4, 5.
//           a = 1: no post copy; a = 2 or 3: the boundary 12 is crossed: postprocess copies
//           column 3 + bias 1 (block 4) -> column 2 (block 2) for temporal states and the
//           conv window of block 3 shifted by 1 into block 2.
#include "model/block_table.h"
#include "model/presets.h"
#include "oracle/engine/driver.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mc::oracle::engine {
namespace {

using Table = std::vector<std::int32_t>;

model::Layout tiny_layout() {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  return model::build_layout(p.config, p.spec); // B 4, attention block 2, 2 drafts, 32 blocks
}

RequestSpec request(std::string id, std::int32_t first_token, std::int32_t num_prompt,
                    std::int32_t max_len, std::int64_t arrival) {
  RequestSpec r{.req_id = std::move(id),
                .num_prompt_tokens = num_prompt,
                .max_len = max_len,
                .arrival_step = arrival};
  r.tokens.resize(static_cast<std::size_t>(max_len + 20));
  std::iota(r.tokens.begin(), r.tokens.end(), first_token);
  return r;
}

EngineOptions walk_options() {
  EngineOptions o;
  o.scheduler.token_budget = 8;
  o.scheduler.full_drafts_per_million = 1'000'000; // every decode carries both drafts
  o.runner.v1_copy_path = V1CopyPath::precopy;
  return o;
}

Table table_of(const Engine& e, const std::string& id) {
  return e.scheduler().blocks().find(id)->groups[0].block_ids;
}

// (src block, dst block) of every decision of the launch of `kind`, per tensor.
std::vector<std::pair<std::int32_t, std::int32_t>> pairs(const StepRecord& rec,
                                                         model::LaunchKind kind) {
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  for (const LaunchRecord& l : rec.launches)
    if (l.kind == kind)
      for (const model::CopyDecision& d : l.decisions)
        out.emplace_back(d.src_block_id, d.dst_block_id);
  return out;
}

// tiny-mamba2 has 2 layers x (conv, temporal): tensors 0, 2 are conv, 1, 3 temporal.
using Pairs = std::vector<std::pair<std::int32_t, std::int32_t>>;

void run_to_first_decode(Engine& e, const model::Layout& layout) {
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.last_step().new_requests.size(), 1u);
  EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 8);
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 1, 2, 3}));
  EXPECT_TRUE(pairs(e.last_record(), model::LaunchKind::precopy).empty());
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 2);
  EXPECT_EQ(e.last_step().cached_requests[0].new_block_ids[0], (Table{4}));
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 1, 2, 3, 4}));
  EXPECT_EQ(pairs(e.last_record(), model::LaunchKind::precopy),
            (Pairs{{1, 2}, {1, 2}, {1, 2}, {1, 2}}));
  EXPECT_NE(e.scheduler().blocks().pool(0).cached(1), nullptr); // the state after 8 tokens
  (void)layout;
}

class DecodeAcceptance : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(DecodeAcceptance, CrossingABlockBoundary) {
  const std::int32_t a = GetParam();
  const model::Layout layout = tiny_layout();
  Engine e(layout, {request("r0", 100, 10, 30, 0)}, 1, walk_options());
  run_to_first_decode(e, layout);
  const RequestSpec truth = request("r0", 100, 10, 30, 0);
  ASSERT_TRUE(
      e.step([&](model::Step& s) { force_acceptance(s.scheduled[0], 10, truth.tokens, a); }));
  const model::ScheduledRequest& row = e.last_step().scheduled[0];
  EXPECT_EQ(row.num_scheduled_tokens, 3);
  EXPECT_EQ(row.num_draft_tokens, 2);
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 0, 2, 3, 4, 5}));
  EXPECT_EQ(pairs(e.last_record(), model::LaunchKind::precopy),
            (Pairs{{2, 3}, {2, 3}, {2, 3}, {2, 3}}));
  const Pairs post = pairs(e.last_record(), model::LaunchKind::postprocess);
  if (a == 1)
    EXPECT_TRUE(post.empty());
  else
    EXPECT_EQ(post, (Pairs{{3, 2}, {4, 2}, {3, 2}, {4, 2}})); // conv from the running block
  const std::optional<ReadPoint> rp = e.runner().read_point("r0");
  ASSERT_TRUE(rp.has_value());
  EXPECT_EQ(rp->state_idx, 3);
  EXPECT_EQ(rp->num_accepted, a); // src column 3 != dst column 2: a is kept
  EXPECT_EQ(e.ledger().truth("r0").num_committed, 10 + a);
  EXPECT_EQ(e.scheduler().blocks().pool(0).cached(2) != nullptr, a >= 2); // boundary 12
  for (int i = 0; i < 40 && e.step(); ++i) {
  }
  ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
  EXPECT_EQ(e.report().finished, 1);
}

INSTANTIATE_TEST_SUITE_P(EachAcceptance, DecodeAcceptance, ::testing::Values(1, 2, 3));

// reset_prefix_cache after step 2 (a = 2, 12 computed): r0 is force-preempted without being
// listed as preempted, the cache is emptied, and it comes back at once among the resumed
// with a fresh table (13 known tokens, chunk 8: [0 x y z]) and no copy (cleanup dropped its
// stale column 3; (0 - 1) // 4 = -1).
TEST(EngineWalkthrough, ResetPrefixCacheThenResume) {
  const model::Layout layout = tiny_layout();
  const RequestSpec truth = request("r0", 100, 10, 30, 0);
  Engine e(layout, {truth}, 1, walk_options());
  run_to_first_decode(e, layout);
  ASSERT_TRUE(
      e.step([&](model::Step& s) { force_acceptance(s.scheduled[0], 10, truth.tokens, 2); }));
  e.request_reset_prefix_cache();
  ASSERT_TRUE(e.step());
  const model::Step& s = e.last_step();
  EXPECT_TRUE(s.reset_prefix_cache);
  EXPECT_TRUE(s.preempted_req_ids.empty());
  ASSERT_EQ(s.cached_requests.size(), 1u);
  EXPECT_TRUE(s.cached_requests[0].resumed);
  EXPECT_EQ(s.cached_requests[0].num_computed_tokens, 0);
  EXPECT_EQ(s.scheduled[0].num_scheduled_tokens, 8);
  const Table t = s.cached_requests[0].new_block_ids[0];
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0], model::kNullBlockId);
  EXPECT_NE(t[1], model::kNullBlockId);
  EXPECT_TRUE(pairs(e.last_record(), model::LaunchKind::precopy).empty());
  EXPECT_TRUE(e.scheduler().blocks().pool(0).cached(2) == nullptr);
  for (int i = 0; i < 40 && e.step(); ++i) {
  }
  ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
  EXPECT_EQ(e.report().resets, 1);
  EXPECT_EQ(e.report().forced_preemptions, 1);
}

// r1 shares r0's first 12 tokens and arrives at step 3. r0 (prompt 12) caches block 1 (after
// 8) and block 2 (after 12) in steps 0-1; at step 3 r0 frees block 2 (stale), which stays in
// the cache, and r1 hits it: num_computed 12, table [0 0 2 6 7 8] (2 nulls, the hit, 1 + nsb
// new blocks), chunk 4 (split at 16), copy column 2 -> 3 (block 2 -> 6).
TEST(EngineWalkthrough, PrefixHitBySecondRequest) {
  const model::Layout layout = tiny_layout();
  RequestSpec r0 = request("r0", 100, 12, 30, 0);
  RequestSpec r1 = request("r1", 500, 17, 40, 3);
  std::copy(r0.tokens.begin(), r0.tokens.begin() + 12, r1.tokens.begin());
  Engine e(layout, {r0, r1}, 1, walk_options());
  auto accept_one = [&](model::Step& s) {
    for (model::ScheduledRequest& row : s.scheduled)
      if (row.num_draft_tokens > 0)
        force_acceptance(row, e.ledger().truth(row.req_id).num_committed,
                         row.req_id == "r0" ? r0.tokens : r1.tokens, 1);
  };
  ASSERT_TRUE(e.step(accept_one));
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 1, 2, 3}));
  ASSERT_TRUE(e.step(accept_one));
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 1, 2, 3, 4}));
  ASSERT_TRUE(e.step(accept_one));
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 0, 2, 3, 4, 5}));
  ASSERT_TRUE(e.step(accept_one));
  const model::Step& s = e.last_step();
  ASSERT_EQ(s.new_requests.size(), 1u);
  EXPECT_EQ(s.new_requests[0].req_id, "r1");
  EXPECT_EQ(s.new_requests[0].num_computed_tokens, 12);
  EXPECT_EQ(s.new_requests[0].block_ids[0], (Table{0, 0, 2, 6, 7, 8}));
  EXPECT_EQ(table_of(e, "r0"), (Table{0, 0, 0, 3, 4, 5}));
  EXPECT_EQ(s.scheduled[1].num_scheduled_tokens, 4);
  EXPECT_EQ(pairs(e.last_record(), model::LaunchKind::precopy),
            (Pairs{{2, 6}, {2, 6}, {2, 6}, {2, 6}}));
  EXPECT_EQ(e.report().prefix_hits, 1);
  for (int i = 0; i < 80 && e.step(accept_one); ++i) {
  }
  ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
  EXPECT_EQ(e.report().finished, 2);
}

// A padded prompt tail (vLLM's pad_spec_decode, #55178): r0's 9-token prompt goes in as a
// chunk of 8 (split at the boundary 8) and its last token alone, which the scheduler sends with
// both drafts as placeholders so the row has the decode shape 1 + 2: the row is the prompt's
// token 8 (108) and two placeholders, none accepted, and 9 tokens are committed. The state
// after the real token is the one kept: the invariants underneath judge the next step's read
// (and every later one) against it, in V1, V2 and all mode. Without the option the tail is a
// row of one token.
class PaddedTail : public ::testing::TestWithParam<int> {};

TEST_P(PaddedTail, IsADecodeRowWhosePlaceholdersAreRejected) {
  const model::Layout base = tiny_layout();
  model::CacheConfig config = base.config;
  EngineOptions o = walk_options();
  if (GetParam() == 1) o.runner.flavour = model::RunnerFlavour::v2;
  if (GetParam() == 2) config.mode = model::CacheMode::all;
  config.runner = o.runner.flavour;
  const model::Layout layout = model::build_layout(config, base.spec);
  for (const bool pad : {true, false}) {
    o.scheduler.pad_prompt_tails = pad;
    Engine e(layout, {request("r0", 100, 9, 30, 0)}, 1, o);
    ASSERT_TRUE(e.step());
    EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 8);
    ASSERT_TRUE(e.step());
    const model::ScheduledRequest& tail = e.last_step().scheduled[0];
    EXPECT_EQ(tail.num_scheduled_tokens, pad ? 3 : 1);
    EXPECT_EQ(tail.num_draft_tokens, pad ? 2 : 0);
    EXPECT_EQ(tail.num_accepted_tokens, 1);
    EXPECT_EQ(tail.token_ids.front(), 108);
    EXPECT_EQ(e.ledger().truth("r0").num_committed, 9);
    ASSERT_TRUE(e.step());
    EXPECT_EQ(e.last_step().scheduled[0].token_ids.front(), 109); // the first decode
    for (int i = 0; i < 40 && e.step(); ++i) {
    }
    ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
    EXPECT_EQ(e.report().finished, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(V1V2All, PaddedTail, ::testing::Values(0, 1, 2));

} // namespace
} // namespace mc::oracle::engine
