// The signature of a failing launch (fuzz/campaign/kernel_signature.h), pinned text for every
// kind of difference it tells apart: the signature's key decides which failures are one
// finding (deduplication), which a --skip-signature names, and what the shrinker keeps as the
// same finding, so a change to any of these strings changes what a campaign reports.
//
// One hand-made precopy launch, five batch rows over six slots, each row with one feature the
// signature names (the oracle's decisions say which):
//   row 0 (slot 1): column 0 -> 1, blocks 1 -> 2                              copy
//   row 1 (slot 3): column 0 -> 1, both block 3, token bias 1                 same-block shift
//   row 2 (slot -1): skipped
//   row 3 (slot 0): column 0 -> 1, blocks 0 (the null block) -> 6            null source
//   row 4 (slot 2): column 1 -> 1                                             no copy
// Slots 4 and 5 belong to no row.
#include "fuzz/campaign/kernel_signature.h"
#include "model/launch_features.h"
#include "oracle/launch.h"
#include "tests/gpu/case_helpers.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace mc::fuzz {
namespace {

using model::LaunchKind;
using Features = std::vector<std::string>;

// mamba2 with a conv state (tensor 0) and a temporal state (tensor 1) per layer, one layer.
// `policy` separate: each state in pages of its own; shared: both in one page, padded.
model::Layout mamba2_layout(model::PagePolicy policy) {
  return gpu::test::small_mamba2_layout(policy);
}

model::LaunchCase five_rows(model::PagePolicy policy = model::PagePolicy::separate) {
  model::LaunchCase c = gpu::test::make_case(mamba2_layout(policy), LaunchKind::precopy, 5, 2, 2);
  c.num_slots = 6;
  gpu::test::set_row(c, 0, {1, 2});
  gpu::test::set_row(c, 1, {3, 3});
  gpu::test::set_row(c, 2, {4, 5});
  gpu::test::set_row(c, 3, {0, 6});
  gpu::test::set_row(c, 4, {7, 7});
  c.requests.idx_mapping = {1, 3, -1, 0, 2};
  //                     slot 0  1  2  3  4   5
  c.requests.src_col = {0, 0, 1, 0, -1, -1};
  c.requests.state_idx = {1, 1, 1, 1, 0, 0};
  c.requests.token_bias = {0, 0, 0, 1, 0, 0};
  return c;
}

// A mismatch of `launch` whose first difference is `difference`, with the oracle's result.
CaseOutcome mismatch(const model::LaunchCase& launch, Difference difference) {
  CaseOutcome o{.status = CaseStatus::mismatch, .oracle = oracle::run_launch(launch)};
  o.difference = std::move(difference);
  return o;
}

Signature signature_of(const model::LaunchCase& launch, Difference difference) {
  return kernel_signature(launch, mismatch(launch, std::move(difference)));
}

Difference decision_at(std::int32_t batch_row) {
  return {.category = DifferenceCategory::decisions, .batch_row = batch_row, .tensor = 0};
}

Difference array_entry(std::string array, std::int32_t index) {
  return {.category = DifferenceCategory::requests, .array = std::move(array), .index = index};
}

Difference arena_bytes(std::int32_t tensor, std::int64_t block_id) {
  return {.category = DifferenceCategory::arena,
          .arena_location = ArenaLocation{.tensor = tensor, .block_id = block_id}};
}

Difference page_padding() {
  return {.category = DifferenceCategory::arena,
          .arena_location = ArenaLocation{.tensor = -1, .block_id = 2, .in_padding = true}};
}

// The launch as the tests below read it: the rows' features as the oracle's decisions give them.
TEST(KernelSignature, TheLaunchHasTheFeaturesItIsMadeFor) {
  const model::LaunchCase c = five_rows();
  const model::LaunchResult r = oracle::run_launch(c);
  std::vector<std::int32_t> rows;
  for (const model::CopyDecision& d : r.decisions)
    rows.push_back(d.batch_row);
  EXPECT_EQ(rows, (std::vector<std::int32_t>{0, 0, 1, 1, 3, 3})); // conv and temporal each
  EXPECT_EQ(signature_of(c, decision_at(0)).features, (Features{"copy"}));
  EXPECT_EQ(signature_of(c, decision_at(1)).features, (Features{"copy", "same-block-shift"}));
  EXPECT_EQ(signature_of(c, decision_at(2)).features, (Features{"no-copy", "skipped-row"}));
  EXPECT_EQ(signature_of(c, decision_at(3)).features, (Features{"copy", "null-source"}));
  EXPECT_EQ(signature_of(c, decision_at(4)).features, (Features{"no-copy"}));
}

TEST(KernelSignature, AStatusNamesNoRow) {
  const Signature s = signature_of(five_rows(), {.category = DifferenceCategory::status});
  EXPECT_EQ(s.key(), "kernel:precopy:status:-");
  EXPECT_EQ(s.to_string(), "kernel:precopy:deterministic:status:-");
  EXPECT_TRUE(s.features.empty());
}

TEST(KernelSignature, ADecisionNamesItsRowsMostTellingFeature) {
  const model::LaunchCase c = five_rows();
  EXPECT_EQ(signature_of(c, decision_at(0)).key(), "kernel:precopy:decisions:copy");
  EXPECT_EQ(signature_of(c, decision_at(1)).key(), "kernel:precopy:decisions:same-block-shift");
  EXPECT_EQ(signature_of(c, decision_at(2)).key(), "kernel:precopy:decisions:skipped-row");
  EXPECT_EQ(signature_of(c, decision_at(3)).key(), "kernel:precopy:decisions:null-source");
  EXPECT_EQ(signature_of(c, decision_at(4)).key(), "kernel:precopy:decisions:no-copy");
  // A decision of no row (one the backend made that the oracle did not).
  const Signature none = signature_of(c, decision_at(-1));
  EXPECT_EQ(none.key(), "kernel:precopy:decisions:-");
  EXPECT_TRUE(none.features.empty());
}

// A per-request entry names the array, and the row that owns the entry by the array's indexing.
TEST(KernelSignature, ARequestArrayEntryNamesTheArrayAndTheRowOwningIt) {
  const model::LaunchCase c = five_rows();
  // By slot: slot 3 is row 1's; slot 4 is no row's.
  EXPECT_EQ(signature_of(c, array_entry("src_col", 3)).key(),
            "kernel:precopy:request-array-src_col:same-block-shift");
  EXPECT_EQ(signature_of(c, array_entry("state_idx", 4)).key(),
            "kernel:precopy:request-array-state_idx:-");
  // By batch row: entry 2 is row 2's; entry 5 is past the batch.
  EXPECT_EQ(signature_of(c, array_entry("idx_mapping", 2)).key(),
            "kernel:precopy:request-array-idx_mapping:skipped-row");
  EXPECT_EQ(signature_of(c, array_entry("idx_mapping", 5)).key(),
            "kernel:precopy:request-array-idx_mapping:-");
  // By row boundary: entry 3 is row 3's start; entry 5, the end of the batch, the last row's.
  EXPECT_EQ(signature_of(c, array_entry("query_start_loc", 3)).key(),
            "kernel:precopy:request-array-query_start_loc:null-source");
  EXPECT_EQ(signature_of(c, array_entry("query_start_loc", 5)).key(),
            "kernel:precopy:request-array-query_start_loc:no-copy");
  // No index, or an array no launch has: no row.
  EXPECT_EQ(signature_of(c, array_entry("num_accepted", -1)).key(),
            "kernel:precopy:request-array-num_accepted:-");
  EXPECT_EQ(signature_of(c, array_entry("no_such_array", 0)).key(),
            "kernel:precopy:request-array-no_such_array:-");
}

// Arena bytes: in the block a decision of the oracle writes (state-bytes, that decision's row),
// in a block none writes (stray-write), or in a page's padding.
TEST(KernelSignature, ArenaBytesAreStateBytesAStrayWriteOrPagePadding) {
  const model::LaunchCase c = five_rows();
  const Signature state = signature_of(c, arena_bytes(0, 2)); // row 0's conv destination
  EXPECT_EQ(state.key(), "kernel:precopy:state-bytes:copy");
  EXPECT_EQ(state.features, (Features{"copy"}));
  EXPECT_EQ(signature_of(c, arena_bytes(1, 3)).key(),
            "kernel:precopy:state-bytes:same-block-shift");
  // Row 1's source block 1 is read, not written; block 5 is skipped row 2's.
  EXPECT_EQ(signature_of(c, arena_bytes(0, 1)).key(), "kernel:precopy:stray-write:-");
  EXPECT_EQ(signature_of(c, arena_bytes(1, 5)).key(), "kernel:precopy:stray-write:-");
  EXPECT_EQ(signature_of(c, {.category = DifferenceCategory::arena}).key(),
            "kernel:precopy:stray-write:-");
  const Signature padding = signature_of(c, page_padding());
  EXPECT_EQ(padding.key(), "kernel:precopy:page-padding:-");
  EXPECT_TRUE(padding.features.empty());
}

// A state that shares its page with others adds shared-page to the features, never to the key.
TEST(KernelSignature, ASharedPageIsAFeatureNotTheShape) {
  const model::LaunchCase c = five_rows(model::PagePolicy::shared);
  ASSERT_TRUE(model::tensor_shares_page(c.layout, 0));
  const Signature state = signature_of(c, arena_bytes(0, 2));
  EXPECT_EQ(state.key(), "kernel:precopy:state-bytes:copy");
  EXPECT_EQ(state.features, (Features{"copy", "shared-page"}));
  const Signature stray = signature_of(c, arena_bytes(0, 5));
  EXPECT_EQ(stray.key(), "kernel:precopy:stray-write:-");
  EXPECT_EQ(stray.features, (Features{"shared-page"}));
  EXPECT_TRUE(signature_of(c, page_padding()).features.empty());
  // Differences that are not arena bytes never name the page.
  EXPECT_EQ(signature_of(c, decision_at(0)).features, (Features{"copy"}));
}

TEST(KernelSignature, AnOracleRejectionOrABackendErrorNamesNoRow) {
  const model::LaunchCase c = five_rows();
  const Signature rejected = kernel_signature(
      c, CaseOutcome{.status = CaseStatus::oracle_rejected, .error = "row 0: column 9"});
  EXPECT_EQ(rejected.key(), "kernel:precopy:oracle-rejected:-");
  EXPECT_EQ(rejected.to_string(), "kernel:precopy:deterministic:oracle-rejected:-");
  const Signature error = kernel_signature(
      c, CaseOutcome{.status = CaseStatus::backend_failed, .error = "killed by SIGSEGV"});
  EXPECT_EQ(error.key(), "kernel:precopy:backend-error:-");
  EXPECT_EQ(error.to_string(), "kernel:precopy:backend-error:backend-error:-");
  EXPECT_EQ(error.classification, Classification::backend_error);
  EXPECT_TRUE(error.features.empty());
}

TEST(KernelSignatureDeathTest, ACaseThatHeldHasNone) {
  const model::LaunchCase c = five_rows();
  EXPECT_DEATH(kernel_signature(c, CaseOutcome{}), "outcome.failed()");
}

// failing_row itself, for the rows above.
TEST(FailingRow, IsTheRowOfTheDecisionTheEntryOrTheWrittenBlock) {
  const model::LaunchCase c = five_rows();
  const model::LaunchResult oracle = oracle::run_launch(c);
  using Row = std::optional<std::int32_t>;
  EXPECT_EQ(failing_row(c, oracle, {.category = DifferenceCategory::status}), Row());
  EXPECT_EQ(failing_row(c, oracle, decision_at(3)), Row(3));
  EXPECT_EQ(failing_row(c, oracle, decision_at(-1)), Row());
  EXPECT_EQ(failing_row(c, oracle, array_entry("token_bias", 0)), Row(3));
  EXPECT_EQ(failing_row(c, oracle, array_entry("token_bias", 5)), Row());
  EXPECT_EQ(failing_row(c, oracle, array_entry("idx_mapping", 4)), Row(4));
  EXPECT_EQ(failing_row(c, oracle, array_entry("idx_mapping", 5)), Row());
  EXPECT_EQ(failing_row(c, oracle, array_entry("query_start_loc", 0)), Row(0));
  EXPECT_EQ(failing_row(c, oracle, array_entry("query_start_loc", 5)), Row(4));
  EXPECT_EQ(failing_row(c, oracle, array_entry("src_col", -1)), Row());
  EXPECT_EQ(failing_row(c, oracle, array_entry("no_such_array", 1)), Row());
  EXPECT_EQ(failing_row(c, oracle, arena_bytes(1, 6)), Row(3));
  EXPECT_EQ(failing_row(c, oracle, arena_bytes(1, 1)), Row());
  EXPECT_EQ(failing_row(c, oracle, page_padding()), Row());
  EXPECT_EQ(failing_row(c, oracle, {.category = DifferenceCategory::arena}), Row());
}

} // namespace
} // namespace mc::fuzz
