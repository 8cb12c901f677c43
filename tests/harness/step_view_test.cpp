// The per-step view (harness/step_view.h) of a production-size library trace, value by value:
// B = 560, a 5600-token prompt in chunks of 2800, then a second request with a prefix hit.
#include "harness/replay.h"
#include "harness/simulate.h"
#include "model/errors.h"
#include "model/presets.h"
#include "scenarios/trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unistd.h>
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

// An async run (tests/oracle/engine/async_test.cpp walks the same request by hand): each step
// after the first names the step in flight while it was planned, a running row the count it
// was planned from where the step in flight rejected drafts, and the frees held back for it.
TEST(StepView, AsyncPlannedDuringOptimisticCountsAndHeldBackFrees) {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  SimulationOptions s{.config = p.config, .spec = p.spec, .num_steps = 6};
  oracle::engine::RequestSpec r{.req_id = "r0", .num_prompt_tokens = 10, .max_len = 30};
  r.tokens.resize(50);
  std::iota(r.tokens.begin(), r.tokens.end(), 100);
  s.requests = {r};
  s.engine.scheduler.token_budget = 8;
  s.engine.scheduler.full_drafts_per_million = 1'000'000;
  s.engine.scheduler.async_scheduling = true;
  std::vector<StepView> views;
  s.on_view = [&views](const StepView& v) { views.push_back(v); };
  ASSERT_TRUE(simulate(s).held());
  ASSERT_EQ(views.size(), 6u);
  EXPECT_FALSE(views[0].planned_during.has_value());
  for (std::size_t i = 1; i < views.size(); ++i)
    EXPECT_EQ(views[i].planned_during, static_cast<std::int64_t>(i) - 1);
  std::vector<std::int64_t> held;
  std::vector<std::optional<std::int32_t>> optimistic;
  std::vector<std::int32_t> accepted;
  for (const StepView& v : views) {
    held.push_back(v.frees_held_back);
    optimistic.push_back(v.rows.at(0).computed_optimistic);
    accepted.push_back(v.rows.at(0).accepted);
    EXPECT_EQ(to_json(v)["frees_held_back"], v.frees_held_back);
  }
  // Step 2 accepts both drafts: step 3 starts from 13 as planned; step 3 accepts none, so
  // step 4, planned from 13 + 3 = 16, starts from 14. Planning step 3 frees block 1 (the state
  // after 8 tokens) and planning step 4 block 2, each held for the step in flight.
  EXPECT_EQ(accepted, (std::vector<std::int32_t>{1, 1, 3, 1, 3, 3}));
  EXPECT_EQ(optimistic,
            (std::vector<std::optional<std::int32_t>>{std::nullopt, std::nullopt, std::nullopt,
                                                      std::nullopt, 16, std::nullopt}));
  EXPECT_EQ(views[4].rows[0].computed_before, 14);
  EXPECT_EQ(held, (std::vector<std::int64_t>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(to_json(views[4])["rows"][0]["computed_optimistic"], 16);
  EXPECT_EQ(to_json(views[4])["planned_during"], 3);
  EXPECT_TRUE(to_json(views[0])["planned_during"].is_null());
  EXPECT_NE(explain(views[3]).find("; planned during step 2 ("), std::string::npos)
      << explain(views[3]);
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

// The library trace as version 2, with `expect` (JSON) added to its step 1 (line 3).
std::filesystem::path with_expect(const std::string& name, const nlohmann::json& expect,
                                  int version = 2) {
  std::ifstream in(kTrace);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(lines.at(0));
  header["version"] = version;
  lines[0] = header.dump();
  nlohmann::ordered_json step = nlohmann::ordered_json::parse(lines.at(2));
  step["expect"] = expect;
  lines[2] = step.dump();
  const auto path =
      std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream out(path);
  for (const std::string& line : lines)
    out << line << "\n";
  return path;
}

TEST(Expectations, HoldingOnesAreCounted) {
  const nlohmann::json expect = nlohmann::json::parse(
      R"({"a": {"pre_copy": [4, 9], "post_copy": null, "state_col": 9, "num_accepted": 1,
                "block_mask": [[0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1]]}})");
  const ReplayResult r = replay_file(with_expect("expect-ok", expect), {});
  EXPECT_TRUE(r.held()) << r.summary();
  EXPECT_EQ(r.expectations_checked, 5);
  EXPECT_NE(r.summary().find("5 expectations held"), std::string::npos) << r.summary();
}

TEST(Expectations, AWrongDestinationNamesStepRequestFieldAndBothValues) {
  const nlohmann::json expect = nlohmann::json::parse(R"({"a": {"pre_copy": [4, 10]}})");
  const ReplayResult r = replay_file(with_expect("expect-bad", expect), {});
  ASSERT_NE(r.expectation(), nullptr) << r.summary();
  EXPECT_FALSE(r.held());
  EXPECT_EQ(r.expectation()->step, 1);
  EXPECT_EQ(r.expectation()->request, "a");
  EXPECT_EQ(r.expectation()->field, "pre_copy");
  EXPECT_EQ(r.stop_line, 3);
  EXPECT_EQ(r.summary(), "EXPECTATION at step 1 (line 3): request a: expect.pre_copy: the trace "
                         "expects [4, 10], the oracle has [4, 9]");
}

TEST(Expectations, EachFieldIsChecked) {
  for (const char* text : {R"({"a": {"post_copy": [1, 2]}})", R"({"a": {"state_col": 8}})",
                           R"({"a": {"num_accepted": 2}})", R"({"a": {"pre_copy": null}})",
                           R"({"a": {"block_mask": [[1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1]]}})"}) {
    const ReplayResult r =
        replay_file(with_expect("expect-field", nlohmann::json::parse(text)), {});
    EXPECT_NE(r.expectation(), nullptr) << text << ": " << r.summary();
  }
}

TEST(Expectations, NeedVersionTwoAndAScheduledRequest) {
  const nlohmann::json expect = nlohmann::json::parse(R"({"a": {"state_col": 9}})");
  EXPECT_THROW(replay_file(with_expect("expect-v1", expect, 1), {}), model::InputError);
  const nlohmann::json stranger = nlohmann::json::parse(R"({"zz": {"state_col": 9}})");
  try {
    replay_file(with_expect("expect-stranger", stranger), {});
    FAIL() << "an expectation of an unscheduled request was read";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":3: expect.zz: request 'zz' is not scheduled"),
              std::string::npos)
        << e.what();
  }
}

TEST(Expectations, WriterRefusesThemUnderAVersionOneHeader) {
  scenarios::TraceReader reader(kTrace);
  scenarios::TraceHeader header = reader.header();
  model::Step step = *reader.next();
  step.expect.push_back({.req_id = "a", .state_col = 4});
  std::ostringstream v1;
  scenarios::TraceWriter old_writer(v1, "v1", header);
  EXPECT_THROW(old_writer.write(step), model::InputError);
  header.version = 2;
  std::ostringstream v2;
  scenarios::TraceWriter writer(v2, "v2", header);
  writer.write(step);
  std::istringstream back(v2.str());
  scenarios::TraceReader again(back, "v2");
  const model::Step read = *again.next();
  ASSERT_EQ(read.expect.size(), 1u);
  EXPECT_EQ(read.expect[0].state_col, 4);
  EXPECT_FALSE(read.expect[0].pre_copy.has_value());
}

} // namespace
} // namespace mc::harness
