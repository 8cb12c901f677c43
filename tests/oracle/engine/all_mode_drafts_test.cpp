// A hand-derived all-mode walkthrough with drafts on tiny-mamba2 (B = 4, two drafts, nsb = 2),
// every table, read column and cached block worked out by hand from model/FORWARD.md; the
// engine's own invariants (every read, the next step's state, every cached block) run
// underneath and must stay silent.
//
// r0: prompt of 10 tokens, budget 8; a table has cdiv(tokens, 4) + 2 columns.
//   step 0: prefill 8: table [1 2 3 4]; boundary 4 -> column 0, the state after 8 -> column 1.
//           No record (a prefill): the next step reads column cdiv(8, 4) - 1 = 1.
//   step 1: prefill 2: table [1 2 3 4 5]; the state after 10 -> column 2 (block 3). The prompt
//           completes and one token is sampled; the next step reads column 2.
//   step 2: decode of 1 + 2 drafts (tokens 10, 11, 12): table [1 2 3 4 5 6]; reads column 2;
//           the last scheduled block is column 3: the state after 13 -> column 3 (block 4),
//           the boundary 12 -> column 2 (block 3), the draft prefixes 11 and 12 -> columns
//           4 and 5 (blocks 5 and 6). A full decode: the record is column 3, and the next step
//           reads column 3 + a for a = 1, 2 and column 3 itself for a = 3.
#include "model/presets.h"
#include "oracle/engine/driver.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace mc::oracle::engine {
namespace {

using Table = std::vector<std::int32_t>;

model::Layout all_mode_layout() {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  model::CacheConfig config = p.config; // B 4, 2 drafts, nsb 2
  config.mode = model::CacheMode::all;
  return model::build_layout(config, p.spec);
}

RequestSpec request(std::int32_t max_len) {
  RequestSpec r{.req_id = "r0", .num_prompt_tokens = 10, .max_len = max_len, .arrival_step = 0};
  r.tokens.resize(static_cast<std::size_t>(max_len + 20));
  std::iota(r.tokens.begin(), r.tokens.end(), 100);
  return r;
}

EngineOptions walk_options() {
  EngineOptions o;
  o.scheduler.token_budget = 8;
  o.scheduler.full_drafts_per_million = 1'000'000; // every decode carries both drafts
  return o;
}

Table table_of(const Engine& e) {
  return e.scheduler().blocks().find("r0")->groups[0].block_ids;
}

std::int32_t read_column(Engine& e) {
  const std::optional<ReadPoint> rp = e.runner().read_point("r0");
  return rp ? rp->state_idx : -1;
}

class AllModeDecode : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(AllModeDecode, ReadsAtTheRecordPlusAcceptedUnlessAllAccepted) {
  const std::int32_t a = GetParam();
  const RequestSpec truth = request(30);
  Engine e(all_mode_layout(), {truth}, 1, walk_options());
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 8);
  EXPECT_EQ(table_of(e), (Table{1, 2, 3, 4}));
  EXPECT_EQ(read_column(e), 1);
  ASSERT_TRUE(e.step());
  EXPECT_EQ(e.last_step().scheduled[0].num_scheduled_tokens, 2);
  EXPECT_EQ(table_of(e), (Table{1, 2, 3, 4, 5}));
  EXPECT_EQ(read_column(e), 2);
  ASSERT_TRUE(
      e.step([&](model::Step& s) { force_acceptance(s.scheduled[0], 10, truth.tokens, a); }));
  const model::ScheduledRequest& row = e.last_step().scheduled[0];
  EXPECT_EQ(row.num_scheduled_tokens, 3);
  EXPECT_EQ(row.num_draft_tokens, 2);
  EXPECT_EQ(table_of(e), (Table{1, 2, 3, 4, 5, 6}));
  // The decode's writes by column, in token order: the prefix of 11 tokens, the boundary 12
  // and the prefix of 12, then the state after all 13.
  std::vector<std::int32_t> cols;
  for (const BlockAccess& w : e.last_record().access.writes)
    if (w.tensor == 1) cols.push_back(w.col); // the first temporal tensor
  EXPECT_EQ(cols, (std::vector<std::int32_t>{4, 2, 5, 3}));
  EXPECT_EQ(read_column(e), a == 3 ? 3 : 3 + a);
  EXPECT_EQ(e.runner().read_point("r0")->num_accepted, a);
  EXPECT_EQ(e.ledger().truth("r0").num_committed, 10 + a);
  EXPECT_EQ(e.scheduler().blocks().pool(0).cached(3) != nullptr, a >= 2); // boundary 12
  for (int i = 0; i < 40 && e.step(); ++i) {
  }
  ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
  EXPECT_EQ(e.report().finished, 1);
}

INSTANTIATE_TEST_SUITE_P(EachAcceptance, AllModeDecode, ::testing::Values(1, 2, 3));

// A run whose scheduler draws fewer drafts than num_spec (0 or 1 of 2, as vLLM's scheduler
// trims drafts to the token budget): a decode with one draft keeps a record of its last block
// and its draft count, and the next step reads that block when its draft was accepted and the
// column after it when not; a decode without drafts keeps none, and the next step reads the
// block of its last computed token. The invariants underneath judge every read.
TEST(AllModeDecode, FewerDraftsKeepARecordWithTheirCount) {
  EngineOptions o = walk_options();
  o.scheduler.full_drafts_per_million = 0;
  Engine e(all_mode_layout(), {request(60)}, 1, o);
  std::map<std::int32_t, std::int32_t> decodes_by_drafts;
  std::int32_t partial_rejected = 0;
  while (e.step()) {
    const model::Step& step = e.last_step();
    if (step.scheduled.empty()) continue;
    const model::ScheduledRequest& row = step.scheduled[0];
    const std::optional<ReadPoint> rp = e.runner().read_point("r0");
    if (!rp || row.num_scheduled_tokens != 1 + row.num_draft_tokens) continue; // a prefill
    const std::int32_t d = row.num_draft_tokens;
    ASSERT_LE(d, 1);
    ++decodes_by_drafts[d];
    const std::int32_t c =
        e.ledger().truth("r0").num_committed - (d > 0 ? row.num_accepted_tokens : 1);
    const std::int32_t last = (c + row.num_scheduled_tokens - 1) / 4;
    const std::int32_t a = d > 0 ? row.num_accepted_tokens : 1;
    if (d > 0 && a == 1) ++partial_rejected;
    const std::int32_t want = d == 0 ? (c + 1 + 3) / 4 - 1 : a == 1 + d ? last : last + a;
    EXPECT_EQ(rp->state_idx, want) << "step " << step.index << ", c " << c << ", d " << d;
    EXPECT_EQ(rp->anchor, d == 0 ? (c + 1 - 1) / 4 : last) << "step " << step.index;
  }
  ASSERT_FALSE(e.report().first_finding.has_value()) << e.report().first_finding->message;
  EXPECT_EQ(e.report().finished, 1);
  EXPECT_GT(decodes_by_drafts[0], 0);
  EXPECT_GT(decodes_by_drafts[1], 0);
  EXPECT_GT(partial_rejected, 0);
}

} // namespace
} // namespace mc::oracle::engine
