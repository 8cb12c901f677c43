// Async scheduling (REFERENCE.md 3, scheduler.h) worked out by hand on tiny-mamba2 (B = 4, two
// drafts, nsb = 2, V1, precopy), budget 8, one request r0 of 10 prompt tokens (tokens 100,
// 101, ...), every decode with both drafts. Each step N + 1 is planned while step N waits
// for its commit:
//   step 0: prefill chunk 8, table [0 1 2 3] (as sync).
//   step 1, planned during 0: chunk 2 from 8 (a prefill row's optimistic count is its true
//           one); the table grows to [0 1 2 3 4]; the previous running block is column 1.
//   step 2, planned during 1: decode from 10 (3 tokens); stale blocks go by the tokens
//           committed, 8: column 1 is not stale yet (sync, planned from 10, frees it here);
//           the table grows to [0 1 2 3 4 5], column 2 the previous running block, column 1
//           kept to be freed. Its acceptance a is forced.
//   step 3, planned during 2: planned from 10 + 3 = 13 as if both drafts were accepted; the
//           table holds 16 tokens already. Committed 10: column 1 is stale now, its block 1
//           freed while step 2 (whose table holds it) is in flight: held back. Step 2's
//           acceptance then arrives: true count 10 + a (optimistic 13 kept where a < 3).
//   step 4, planned during 3: planned from 13 + a, the table grows to 7 columns (new block
//           6: block 1 came back to the end of the free queue when step 2 completed).
//           Committed 10 + a: column 2 is stale only when a = 3, its block 2 then held back.
// The engine's invariants (and the in-flight checks) run underneath and stay silent.
#include "model/block_table.h"
#include "model/presets.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/in_flight.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mc::oracle::engine {
namespace {

using Table = std::vector<std::int32_t>;

model::Layout tiny_layout() {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  return model::build_layout(p.config, p.spec);
}

RequestSpec request(std::int32_t num_prompt, std::int32_t max_len) {
  RequestSpec r{.req_id = "r0", .num_prompt_tokens = num_prompt, .max_len = max_len};
  r.tokens.resize(static_cast<std::size_t>(max_len + 20));
  std::iota(r.tokens.begin(), r.tokens.end(), 100);
  return r;
}

EngineOptions async_options() {
  EngineOptions o;
  o.scheduler.token_budget = 8;
  o.scheduler.full_drafts_per_million = 1'000'000;
  o.scheduler.async_scheduling = true;
  o.runner.v1_copy_path = V1CopyPath::precopy;
  return o;
}

Table table_of(const Engine& e) {
  return e.scheduler().blocks().find("r0")->groups[0].block_ids;
}

class AsyncWalk : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(AsyncWalk, OptimisticCountsRollbackAndHeldBackFrees) {
  const std::int32_t a = GetParam();
  const RequestSpec truth = request(10, 30);
  Engine e(tiny_layout(), {truth}, 1, async_options());
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.last_step().planned_during, -1);
  EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 8);
  EXPECT_EQ(table_of(e), (Table{0, 1, 2, 3}));

  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.last_step().planned_during, 0);
  EXPECT_EQ(e.last_step().cached_requests[0].num_computed_tokens, 8);
  EXPECT_FALSE(e.last_step().cached_requests[0].num_computed_tokens_optimistic.has_value());
  EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 2);
  EXPECT_EQ(table_of(e), (Table{0, 1, 2, 3, 4}));
  EXPECT_NE(e.scheduler().blocks().pool(0).cached(1), nullptr); // step 0 committed

  ASSERT_TRUE(
      e.step([&](model::Step& s) { force_acceptance(s.scheduled[0], 10, truth.tokens, a); }));
  EXPECT_EQ(e.last_step().planned_during, 1);
  EXPECT_EQ(e.last_step().cached_requests[0].num_computed_tokens, 10);
  EXPECT_EQ(e.last_step().scheduled[0].num_draft_tokens, 2);
  EXPECT_EQ(table_of(e), (Table{0, 1, 2, 3, 4, 5})); // sync: {0, 0, 2, 3, 4, 5}
  EXPECT_EQ(e.scheduler().blocks().find("r0")->groups[0].older_state_idx, (Table{1}));
  EXPECT_EQ(e.last_record().frees_held_back, 0);

  ASSERT_TRUE(e.step());
  const model::Step& step3 = e.last_step();
  EXPECT_EQ(step3.planned_during, 2);
  EXPECT_EQ(step3.cached_requests[0].num_computed_tokens, 10 + a);
  EXPECT_EQ(step3.cached_requests[0].num_computed_tokens_optimistic,
            a < 3 ? std::optional<std::int32_t>(13) : std::nullopt);
  EXPECT_TRUE(step3.cached_requests[0].new_block_ids[0].empty()); // 16 tokens fit already
  EXPECT_EQ(step3.scheduled[0].token_ids[0], 110 + a);            // the token sampled at 10 + a
  EXPECT_EQ(table_of(e), (Table{0, 0, 2, 3, 4, 5}));
  EXPECT_EQ(e.last_record().frees_held_back, 1); // block 1, held for step 2
  EXPECT_TRUE(e.scheduler().blocks().pool(0).held_back_blocks().empty()); // step 2 completed

  ASSERT_TRUE(e.step());
  const model::Step& step4 = e.last_step();
  EXPECT_EQ(step4.planned_during, 3);
  EXPECT_EQ(step4.cached_requests[0].new_block_ids[0], (Table{6}));
  EXPECT_EQ(table_of(e), a == 3 ? (Table{0, 0, 0, 3, 4, 5, 6}) : (Table{0, 0, 2, 3, 4, 5, 6}));
  EXPECT_EQ(e.last_record().frees_held_back, a == 3 ? 1 : 0);

  for (int i = 0; i < 40 && e.step(); ++i) {
  }
  ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
  EXPECT_EQ(e.report().finished, 1);
}

INSTANTIATE_TEST_SUITE_P(EachAcceptance, AsyncWalk, ::testing::Values(1, 2, 3));

// With one request the async engine commits what the sync engine commits, its optimistic
// counts and held-back frees notwithstanding; every cached block holds its boundary's ground
// truth on the way (the engine checks it after each commit).
TEST(AsyncEngine, CommitsWhatTheSyncEngineCommits) {
  const RequestSpec truth = request(23, 60);
  EngineOptions sync = async_options();
  sync.scheduler.async_scheduling = false;
  Engine s(tiny_layout(), {truth}, 7, sync);
  Engine a(tiny_layout(), {truth}, 7, async_options());
  while (s.step()) {
  }
  while (a.step()) {
  }
  ASSERT_FALSE(s.report().first_finding.has_value()) << s.report().first_finding->message;
  ASSERT_FALSE(a.report().first_finding.has_value()) << a.report().first_finding->message;
  EXPECT_EQ(a.report().finished, 1);
  EXPECT_EQ(a.ledger().truth("r0").tokens, s.ledger().truth("r0").tokens);
  EXPECT_EQ(a.ledger().truth("r0").num_committed, s.ledger().truth("r0").num_committed);
  // One step more: the last commit comes with the planning of an empty step.
  EXPECT_EQ(s.report().steps, 21);
  EXPECT_EQ(a.report().steps, 22);
}

model::Step step_with_write(std::int64_t index, std::int64_t planned_during,
                            const std::string& req_id) {
  model::Step step{.index = index, .planned_during = planned_during};
  step.scheduled.push_back({.req_id = req_id, .num_scheduled_tokens = 1, .token_ids = {1}});
  return step;
}

StepRecord writes(std::int32_t block) {
  StepRecord r;
  r.access.writes.push_back(
      {.batch_row = 0, .tensor = 0, .group = 0, .col = 3, .block_id = block, .origin = "forward"});
  return r;
}

TEST(InFlightAccesses, AWriteForAnotherRequestOfABlockTheStepInFlightTouched) {
  const model::Layout layout = tiny_layout();
  InFlightAccesses accesses;
  accesses.remember(step_with_write(4, 3, "a"), writes(7));
  // The same request writes its own block again: fine.
  EXPECT_FALSE(accesses.check(layout, step_with_write(5, 4, "a"), writes(7)).has_value());
  // Another block: fine.
  EXPECT_FALSE(accesses.check(layout, step_with_write(5, 4, "b"), writes(8)).has_value());
  // Not planned during step 4 (sync, or another step): nothing to hold it to.
  EXPECT_FALSE(accesses.check(layout, step_with_write(5, -1, "b"), writes(7)).has_value());
  const std::optional<Finding> f = accesses.check(layout, step_with_write(5, 4, "b"), writes(7));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::in_flight_write_conflict);
  EXPECT_EQ(f->step, 5);
  EXPECT_EQ(f->req_id, "b");
  EXPECT_EQ(f->block_id, 7);
  EXPECT_EQ(f->col, 3);
  EXPECT_NE(f->message.find("writes block 7 (forward) while step 4, in flight when this step "
                            "was planned, touched it for request a"),
            std::string::npos)
      << f->message;
}

TEST(InFlightHandouts, OnlyFreshBlocksAreHeldToTheStepInFlight) {
  const model::Layout layout = tiny_layout(); // align, nsb 2
  model::Step step{.index = 9, .planned_during = 8};
  const model::GroupBlockIds old_row = {{0, 0, 4, 5, 6}};
  const auto held = [](std::int32_t, std::int32_t block) { return block == 5 || block == 9; };
  // 5 and 6 are the old speculative blocks moving to the end: not handed out.
  EXPECT_FALSE(check_growth_handout(layout, step, "a", old_row, {{5, 7}}, held).has_value());
  const std::optional<Finding> f = check_growth_handout(layout, step, "a", old_row, {{6, 9}}, held);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::in_flight_block_reused);
  EXPECT_EQ(f->col, 6);
  EXPECT_EQ(f->block_id, 9);
  // A first table: the prefix hit's block (column 1 of a hit of 8 tokens) is shared, not
  // handed out; its fresh blocks are.
  EXPECT_FALSE(check_first_handout(layout, step, "b", {{0, 9, 7, 8, 10}}, 8, held).has_value());
  const std::optional<Finding> g = check_first_handout(layout, step, "b", {{0, 9, 5, 8}}, 8, held);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->col, 2);
  EXPECT_EQ(g->block_id, 5);
  EXPECT_NE(g->message.find("handed out (in b's first table at position 2) while step 8"),
            std::string::npos)
      << g->message;
  step.planned_during = -1; // planned with nothing in flight
  EXPECT_FALSE(check_first_handout(layout, step, "b", {{0, 9, 5, 8}}, 8, held).has_value());
}

} // namespace
} // namespace mc::oracle::engine
