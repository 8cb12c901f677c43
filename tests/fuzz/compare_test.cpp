// compare_results: one mutation at a time, and the exact message each one gives.
#include "fuzz/compare.h"

#include "model/presets.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace mc::fuzz {
namespace {

// tiny-mixed: arena 0 holds group 0 layer 0 in 96-byte pages: conv SD [3,8] fp16 at
// byte 0 (48 bytes), temporal [2,2,2] fp32 at byte 48 (32 bytes), padding 80..95.
model::LaunchCase tiny_case() {
  const model::Preset& p = model::find_preset("tiny-mixed");
  model::LaunchCase c;
  c.layout = model::build_layout(p.config, p.spec);
  c.kind = model::LaunchKind::postprocess_align;
  c.num_reqs = 3;
  c.num_slots = 3;
  c.requests.idx_mapping = {2, -1, 1};
  c.requests.num_accepted = {1, 2, 3};
  for (const model::ArenaSpec& a : c.layout.arenas)
    c.arenas.emplace_back(a.size_bytes());
  for (model::Arena& a : c.arenas)
    a.poison();
  return c;
}

model::CopyDecision decision(std::int32_t row, std::int32_t tensor, std::int32_t bias) {
  return {.batch_row = row,
          .slot = 5,
          .tensor = tensor,
          .group = 0,
          .layer = 1,
          .state = 0,
          .src_col = 2,
          .dst_col = 1,
          .token_bias = bias,
          .src_block_id = 7,
          .dst_block_id = 9,
          .src_byte_offset = 16 * bias,
          .bytes = 48 - 16 * bias};
}

model::LaunchResult result_of(const model::LaunchCase& c) {
  model::LaunchResult r;
  r.requests = c.requests;
  r.decisions = {decision(0, 0, 1), decision(3, 2, 2)};
  for (const model::Arena& a : c.arenas)
    r.arenas.push_back(a.clone());
  return r;
}

std::string hex_of_poison(std::int64_t offset) {
  return fmt::format("{:02x}", model::poison_byte(offset));
}

void flip(model::Arena& a, std::int64_t offset) {
  a.data()[offset] = static_cast<std::byte>(~static_cast<std::uint8_t>(a.data()[offset]));
}

TEST(CompareResults, EqualResultsHaveNoDifference) {
  const model::LaunchCase c = tiny_case();
  EXPECT_FALSE(compare_results(c, result_of(c), result_of(c)).has_value());
}

TEST(CompareResults, StatusComesFirst) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  actual.status = model::LaunchStatus::unsupported;
  actual.unsupported_reason = "DS conv with bias 1";
  actual.decisions.clear();
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->category, DifferenceCategory::status);
  EXPECT_EQ(d->message, "postprocess_align launch status: expected ok, actual unsupported (\"DS "
                        "conv with bias 1\")");
}

TEST(CompareResults, DecisionBias) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  actual.decisions[1].token_bias = 1;
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->category, DifferenceCategory::decisions);
  EXPECT_EQ(d->message, "batch row 3 (slot 5), group 0 layer 1 state conv: copied column 2 -> 1 "
                        "with bias 1; expected column 2 -> 1 with bias 2");
  EXPECT_EQ(d->batch_row, 3);
  EXPECT_EQ(d->tensor, 2);
}

TEST(CompareResults, DecisionBytesNameTheField) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  actual.decisions[1].bytes = 96; // a page stride instead of the natural bytes (class D)
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(
      d->message,
      "batch row 3 (slot 5), group 0 layer 1 state conv: copied column 2 -> 1 with bias 2; "
      "expected column 2 -> 1 with bias 2 (differs in: bytes; actual column 2 -> 1 with bias "
      "2 (block 7 -> 9, src offset 32, 96 bytes); expected column 2 -> 1 with bias 2 (block 7 "
      "-> 9, src offset 32, 16 bytes))");
}

TEST(CompareResults, MissingExtraAndUnsortedDecisions) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult missing = result_of(c);
  missing.decisions.pop_back();
  auto d = compare_results(c, result_of(c), missing);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "batch row 3 (slot 5), group 0 layer 1 state conv: no copy was made; "
                        "expected column 2 -> 1 with bias 2 (block 7 -> 9, src offset 32, 16 "
                        "bytes)");
  d = compare_results(c, missing, result_of(c));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "batch row 3 (slot 5), group 0 layer 1 state conv: copied column 2 -> 1 "
                        "with bias 2 (block 7 -> 9, src offset 32, 16 bytes); expected no copy");
  model::LaunchResult unsorted = result_of(c);
  std::swap(unsorted.decisions[0], unsorted.decisions[1]);
  d = compare_results(c, result_of(c), unsorted);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "actual decisions are not strictly sorted by (batch row, tensor): entry 1 "
                        "(batch row 0, tensor 0) follows (batch row 3, tensor 2)");
}

TEST(CompareResults, RequestEntryNamesSlotAndBatchRow) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  actual.requests.num_accepted[1] = 1;
  auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->category, DifferenceCategory::requests);
  EXPECT_EQ(d->message, "requests: num_accepted[1] (slot 1, batch row 2): expected 2, actual 1");
  EXPECT_EQ(d->array, "num_accepted");
  EXPECT_EQ(d->index, 1);
  actual = result_of(c);
  actual.requests.num_accepted[0] = 7;
  d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message,
            "requests: num_accepted[0] (slot 0, not in the batch): expected 1, actual 7");
  actual = result_of(c);
  actual.requests.num_accepted.push_back(1);
  d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "requests: array num_accepted has 4 entries; expected 3");
}

TEST(CompareResults, ArenaByteInNaturalBytes) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  const std::int64_t off = 5 * 96 + 48 + 4; // block 5, temporal byte 4 (element 1)
  flip(actual.arenas[0], off);
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->category, DifferenceCategory::arena);
  const std::string e = hex_of_poison(off);
  const std::string a = fmt::format("{:02x}", static_cast<std::uint8_t>(~model::poison_byte(off)));
  EXPECT_EQ(d->message, fmt::format("arena 0 bytes [532, 533) differ: group 0 layer 0 state "
                                    "temporal, block 5, byte 4 of its 32 natural bytes (element "
                                    "1); expected {}, actual {}",
                                    e, a));
  ASSERT_TRUE(d->arena_location);
  EXPECT_EQ(d->arena_location->tensor, 1);
  EXPECT_FALSE(d->arena_location->in_padding);
  EXPECT_EQ(d->tensor, 1);
}

TEST(CompareResults, ArenaByteInPagePadding) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  const std::int64_t off = 5 * 96 + 85;
  flip(actual.arenas[0], off);
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  const std::string prefix = "arena 0 bytes [565, 566) differ: page padding of block 5 (byte 85 "
                             "of the 96-byte page, after group 0 layer 0 state temporal which ends "
                             "at byte 80); expected ";
  EXPECT_EQ(d->message.substr(0, prefix.size()), prefix);
  EXPECT_TRUE(d->arena_location->in_padding);
  EXPECT_EQ(d->arena_location->tensor, -1);
  EXPECT_EQ(d->arena_location->preceding_tensor, 1);
}

TEST(CompareResults, ArenaRunAndConvCoordinates) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  const std::int64_t off = 2 * 96 + 20; // conv SD [3,8] fp16: element 10 = token row 1, channel 2
  for (int i = 0; i < 3; ++i)
    flip(actual.arenas[0], off + i);
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  const std::string prefix =
      "arena 0 bytes [212, 215) differ: group 0 layer 0 state conv, block "
      "2, byte 20 of its 48 natural bytes (token row 1, channel 2); expected ";
  EXPECT_EQ(d->message.substr(0, prefix.size()), prefix);
  EXPECT_EQ(d->arena_location->run_bytes, 3);
  EXPECT_EQ(d->arena_location->expected_hex,
            hex_of_poison(off) + " " + hex_of_poison(off + 1) + " " + hex_of_poison(off + 2));
}

TEST(CompareResults, RunPastTheNaturalBytesIsSaid) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  for (std::int64_t off = 96 + 78; off < 96 + 82; ++off)
    flip(actual.arenas[0], off);
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  EXPECT_NE(d->message.find("byte 30 of its 32 natural bytes (element 7); the run continues past "
                            "the natural bytes"),
            std::string::npos)
      << d->message;
}

TEST(CompareResults, JsonCarriesCategoryMessageAndLocation) {
  const model::LaunchCase c = tiny_case();
  model::LaunchResult actual = result_of(c);
  flip(actual.arenas[0], 5 * 96 + 85);
  const auto d = compare_results(c, result_of(c), actual);
  ASSERT_TRUE(d);
  const nlohmann::json j = to_json(*d);
  EXPECT_EQ(j["category"], "arena");
  EXPECT_EQ(j["message"], d->message);
  EXPECT_EQ(j["arena_location"]["block_id"], 5);
  EXPECT_EQ(j["arena_location"]["offset_in_block"], 85);
  EXPECT_EQ(j["arena_location"]["in_padding"], true);
  EXPECT_FALSE(j["arena_location"].contains("tensor"));
}

} // namespace
} // namespace mc::fuzz
