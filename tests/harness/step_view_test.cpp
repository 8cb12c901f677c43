// The per-step view (harness/step_view.h) of a production-size library trace, value by value:
// B = 560, a 5600-token prompt in chunks of 2800, then a second request with a prefix hit.
#include "harness/replay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace mc::harness {
namespace {

std::vector<StepView> views_of(const std::filesystem::path& trace) {
  std::vector<StepView> views;
  ReplayOptions options;
  options.on_view = [&views](const StepView& v) { views.push_back(v); };
  const ReplayResult r = replay_file(trace, options);
  EXPECT_TRUE(r.held()) << r.summary();
  EXPECT_EQ(static_cast<std::int64_t>(views.size()), r.stats.steps);
  return views;
}

const std::filesystem::path kTrace = std::filesystem::path(MC_SOURCE_DIR) / "scenarios" /
                                     "library" / "p-b560-v1-precopy-chunked-prefill.jsonl";

TEST(StepView, FirstChunkOfANewRequest) {
  const std::vector<StepView> views = views_of(kTrace);
  ASSERT_GE(views.size(), 2u);
  const StepView& v = views[0];
  EXPECT_EQ(v.step, 0);
  ASSERT_EQ(v.rows.size(), 1u);
  const RowView& a = v.rows[0];
  EXPECT_EQ(a.req_id, "a");
  EXPECT_TRUE(a.is_new);
  EXPECT_EQ(a.computed_before, 0);
  EXPECT_EQ(a.scheduled, 2800);
  EXPECT_EQ(a.prefix_hit_tokens, 0);
  EXPECT_FALSE(a.state_col_before.has_value()); // a new request has no column yet
  EXPECT_EQ(a.state_col_after, 4);              // cdiv(2800, 560) - 1
  EXPECT_EQ(a.num_accepted_after, 1);
  EXPECT_FALSE(a.pre_copy.has_value());
  EXPECT_EQ(a.table, (model::GroupBlockIds{{0, 0, 0, 0, 1, 2, 3, 4}}));
  EXPECT_EQ(v.cached, (std::vector<std::vector<std::int32_t>>{{1}}));
  EXPECT_EQ(v.freed, (std::vector<std::vector<std::int32_t>>{{}}));
}

TEST(StepView, SecondChunkCopiesTheRunningStateForward) {
  const std::vector<StepView> views = views_of(kTrace);
  const RowView& a = views.at(1).rows.at(0);
  EXPECT_EQ(a.computed_before, 2800);
  EXPECT_EQ(a.state_col_before, 4);
  EXPECT_EQ(a.state_col_after, 9); // cdiv(5600, 560) - 1
  ASSERT_TRUE(a.pre_copy.has_value());
  EXPECT_EQ(a.pre_copy->src_col, 4);
  EXPECT_EQ(a.pre_copy->token_bias, 0);
  EXPECT_EQ(a.pre_copy->dst_col, 9);
  EXPECT_EQ(a.pre_copy->states, 4); // tiny-mamba2: 2 layers x (conv, temporal)
}

TEST(StepView, LaterRequestStartsFromAPrefixHit) {
  const std::vector<StepView> views = views_of(kTrace);
  const RowView* b = nullptr;
  for (const StepView& v : views)
    for (const RowView& r : v.rows)
      if (r.req_id == "b" && r.is_new) b = &r;
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->prefix_hit_tokens.has_value());
  EXPECT_EQ(*b->prefix_hit_tokens % 560, 0);
  EXPECT_GT(*b->prefix_hit_tokens, 0);
  EXPECT_EQ(b->computed_before, *b->prefix_hit_tokens);
}

TEST(StepView, JsonMarksNullBlocksAndMissingCopies) {
  const std::vector<StepView> views = views_of(kTrace);
  const nlohmann::ordered_json j = to_json(views.at(0));
  EXPECT_TRUE(j["rows"][0]["table"][0][0].is_null());
  EXPECT_EQ(j["rows"][0]["table"][0][4], 1);
  EXPECT_TRUE(j["rows"][0]["pre_copy"].is_null());
  EXPECT_TRUE(j["rows"][0]["state_col_before"].is_null());
  EXPECT_EQ(j["cached"][0][0], 1);
  const std::string table = explain(views.at(1));
  EXPECT_NE(table.find("4+0->9 (4)"), std::string::npos) << table;
}

} // namespace
} // namespace mc::harness
