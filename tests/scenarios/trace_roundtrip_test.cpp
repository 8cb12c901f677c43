// TraceWriter -> TraceReader gives back every field of every step and of the header; the
// forms a writer may choose (defaults left out or spelt out, derived prompts, CRLF, no final
// newline, x_ annotations) read the same.
#include "model/errors.h"
#include "model/presets.h"
#include "scenarios/derived_prompt.h"
#include "scenarios/trace.h"
#include "trace_fixtures.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <sstream>

namespace mc::scenarios {
namespace {

using testing::expect_same_header;
using testing::expect_same_step;
using testing::hand_built_steps;
using testing::mamba2_header;
using testing::mixed_header;
using testing::read_all;
using testing::write_to_string;

const std::string kTinyMamba2Header =
    R"({"format":"mambacheck-trace","version":1,"config":{"mamba_block_size":4,)"
    R"("attn_block_size":2,"num_spec_tokens":2,"num_spec_blocks":2,"mode":"align",)"
    R"("conv_layout":"SD","runner":"v1","tp_size":1},"layout":{"preset":"tiny-mamba2"}})";

std::vector<model::Step> read_text(const std::string& text) {
  std::istringstream in(text);
  TraceReader reader(in, "t.jsonl");
  return read_all(reader);
}

TEST(TraceRoundTrip, HandBuiltStepsComeBackExactly) {
  const std::vector<model::Step> steps = hand_built_steps();
  const std::string text = write_to_string(mixed_header(), steps);
  std::istringstream in(text);
  TraceReader reader(in, "mem.jsonl");
  expect_same_header(mixed_header(), reader.header());
  EXPECT_EQ(reader.layout().num_groups(), 3);
  const std::vector<model::Step> got = read_all(reader);
  ASSERT_EQ(got.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i)
    expect_same_step(steps[i], got[i]);
  EXPECT_EQ(reader.line_number(), static_cast<std::int64_t>(steps.size()) + 1);
  EXPECT_EQ(reader.num_live_requests(), 2u); // "b" and "c"; "a" finished
  EXPECT_FALSE(reader.next().has_value());   // stays at the end
}

// An async trace (version 3): the header's flag, planned_during and the optimistic count come
// back; the line carries them only where they say something.
TEST(TraceRoundTrip, AsyncFieldsComeBack) {
  TraceHeader header = mamba2_header();
  header.version = kTraceFormatVersionAsync;
  header.async_scheduling = true;
  model::Step arrive{.index = 0};
  arrive.new_requests.push_back(
      {.req_id = "a", .prompt_token_ids = {1, 2, 3, 4, 5}, .block_ids = {{1, 2, 3}}});
  arrive.scheduled.push_back(
      {.req_id = "a", .num_scheduled_tokens = 5, .token_ids = {1, 2, 3, 4, 5}});
  model::Step decode{.index = 1, .planned_during = 0};
  decode.cached_requests.push_back(
      {.req_id = "a", .new_block_ids = {{}}, .num_computed_tokens = 5});
  decode.scheduled.push_back({.req_id = "a",
                              .num_scheduled_tokens = 3,
                              .num_draft_tokens = 2,
                              .token_ids = {6, 7, 9},
                              .num_accepted_tokens = 2});
  model::Step next{.index = 2, .planned_during = 1};
  next.cached_requests.push_back({.req_id = "a",
                                  .new_block_ids = {{4}},
                                  .num_computed_tokens = 7,
                                  .num_computed_tokens_optimistic = 8});
  next.scheduled.push_back({.req_id = "a", .num_scheduled_tokens = 1, .token_ids = {8}});
  const std::vector<model::Step> steps = {arrive, decode, next};
  const std::string text = write_to_string(header, steps);
  EXPECT_NE(text.find(R"("version":3)"), std::string::npos);
  EXPECT_NE(text.find(R"("async_scheduling":true)"), std::string::npos);
  EXPECT_NE(text.find(R"({"index":1,"planned_during":0,)"), std::string::npos);
  EXPECT_NE(text.find(R"("num_computed_tokens":7,"num_computed_tokens_optimistic":8})"),
            std::string::npos);
  EXPECT_EQ(text.find(R"({"index":0,"planned_during")"), std::string::npos);
  std::istringstream in(text);
  TraceReader reader(in, "async.jsonl");
  expect_same_header(header, reader.header());
  const std::vector<model::Step> got = read_all(reader);
  ASSERT_EQ(got.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i)
    expect_same_step(steps[i], got[i]);
}

TEST(TraceRoundTrip, InlineLayoutAndDefaultPools) {
  TraceHeader header = mamba2_header();
  header.preset.clear();
  header.layout_spec = model::find_preset("tiny-mixed").spec;
  header.layout_spec.num_blocks = 40;
  header.block_pool_sizes.clear();
  header.config.mode = model::CacheMode::all;
  header.config.conv_layout = model::ConvLayout::DS;
  header.config.runner = model::RunnerFlavour::v2;
  header.derived_vocab_size = 1000;
  std::istringstream in(write_to_string(header, {}));
  TraceReader reader(in, "inline.jsonl");
  header.block_pool_sizes = {40, 40, 40}; // what an absent list means
  expect_same_header(header, reader.header());
  EXPECT_TRUE(reader.header().source.is_null());
  EXPECT_FALSE(reader.next().has_value());
}

TEST(TraceRoundTrip, PresetWithOtherBlockCount) {
  TraceHeader header = mamba2_header();
  header.layout_spec.num_blocks = 100;
  header.block_pool_sizes = {90};
  std::istringstream in(write_to_string(header, {}));
  TraceReader reader(in, "p.jsonl");
  expect_same_header(header, reader.header());
  EXPECT_EQ(reader.layout().spec.num_blocks, 100);
}

TEST(TraceRoundTrip, SpeltOutDefaultsCrlfAndNoFinalNewline) {
  const std::string text =
      kTinyMamba2Header + "\r\n" +
      R"({"index":0,"new_requests":[{"req_id":"r","prompt_token_ids":[3],"num_computed_tokens":0,)"
      R"("block_ids":[[1,2,3]]}],"cached_requests":[],"scheduled":[{"req_id":"r",)"
      R"("num_scheduled_tokens":1,"num_draft_tokens":0,"token_ids":[3],"num_accepted_tokens":1}],)"
      R"("preempted_req_ids":[],"finished_req_ids":[],"reset_prefix_cache":false,"x_ms":3})"
      "\r\n" +
      R"({"index":1,"cached_requests":[{"req_id":"r","num_computed_tokens":1,"x_note":{"a":1}}],)"
      R"("scheduled":[{"req_id":"r","num_scheduled_tokens":1,"token_ids":[4]}]})";
  const std::vector<model::Step> got = read_text(text);
  ASSERT_EQ(got.size(), 2u);
  expect_same_step(
      model::Step{
          .index = 0,
          .new_requests = {{.req_id = "r", .prompt_token_ids = {3}, .block_ids = {{1, 2, 3}}}},
          .scheduled = {{.req_id = "r", .num_scheduled_tokens = 1, .token_ids = {3}}}},
      got[0]);
  EXPECT_EQ(got[1].cached_requests.at(0).new_block_ids, model::GroupBlockIds(1));
}

TEST(DerivedPrompt, MatchesTheCheckValuesOfFormatMd) {
  const std::vector<std::int32_t> stream0 = {19887, 23745, 22222, 4077, 2762, 17242};
  const std::vector<std::int32_t> stream7 = {22865, 9024, 28685, 31848, 28392, 10544};
  EXPECT_EQ(derive_prompt({.prefix_id = 0, .prefix_len = 6, .prompt_len = 6}, 32768), stream0);
  EXPECT_EQ(derive_prompt({.prefix_id = 7, .prefix_len = 6, .prompt_len = 6}, 32768), stream7);
  const std::vector<std::int32_t> mixed = {22865, 9024, 28685, 3806, 15858, 4317};
  EXPECT_EQ(
      derive_prompt({.prefix_id = 7, .prefix_len = 3, .suffix_id = 9, .prompt_len = 6}, 32768),
      mixed);
  EXPECT_EQ(derived_token(4294967295u, 0, 1000), 797);
  EXPECT_EQ(derived_token(4294967295u, 3, 1000), 703);
}

TEST(DerivedPrompt, ExpandedWhenRead) {
  const std::string text =
      kTinyMamba2Header + "\n" +
      R"({"index":0,"new_requests":[{"req_id":"r","prompt_len":6,"prefix_id":7,"prefix_len":3,)"
      R"("suffix_id":9,"block_ids":[[1,2,3]]},{"req_id":"s","prompt_len":6,"prefix_id":0,)"
      R"("block_ids":[[4,5,6]]}],"scheduled":[{"req_id":"r","num_scheduled_tokens":1,)"
      R"("token_ids":[22865]},{"req_id":"s","num_scheduled_tokens":1,"token_ids":[19887]}]})"
      "\n";
  const std::vector<model::Step> got = read_text(text);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].new_requests[0].prompt_token_ids,
            (std::vector<std::int32_t>{22865, 9024, 28685, 3806, 15858, 4317}));
  EXPECT_EQ(got[0].new_requests[1].prompt_token_ids,
            (std::vector<std::int32_t>{19887, 23745, 22222, 4077, 2762, 17242}));
}

TEST(TraceRoundTrip, FileOnDisk) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("mc_trace_rt_" + std::to_string(::getpid()));
  const std::vector<model::Step> steps = hand_built_steps();
  {
    TraceWriter writer(file, mixed_header());
    for (const model::Step& step : steps)
      writer.write(step);
  }
  TraceReader reader(file);
  const std::vector<model::Step> got = read_all(reader);
  ASSERT_EQ(got.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i)
    expect_same_step(steps[i], got[i]);
  std::filesystem::remove(file);
}

TEST(TraceWriterChecks, RefusesAStepTheReaderWouldRefuse) {
  std::ostringstream out;
  TraceWriter writer(out, "w.jsonl", mamba2_header());
  model::Step bad{.index = 0,
                  .scheduled = {{.req_id = "ghost", .num_scheduled_tokens = 1, .token_ids = {1}}}};
  try {
    writer.write(bad);
    FAIL() << "accepted a step scheduling an unknown request";
  } catch (const model::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("w.jsonl: step 0: scheduled[0].req_id: ", 0), 0u)
        << e.what();
  }
  EXPECT_EQ(writer.steps_written(), 0);
}

TEST(TraceWriterChecks, RefusesABadHeader) {
  TraceHeader header = mamba2_header();
  header.block_pool_sizes = {33}; // more than num_blocks
  std::ostringstream out;
  EXPECT_THROW(TraceWriter(out, "h.jsonl", header), model::InputError);
  header = mamba2_header();
  header.config.num_spec_blocks = 1; // align mode needs nsb == num_spec_tokens
  EXPECT_THROW(TraceWriter(out, "h.jsonl", header), model::InputError);
}

} // namespace
} // namespace mc::scenarios
