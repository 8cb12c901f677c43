// Every launch kind on the hand layout (oracle_test_util.h), expectations worked out by hand
// from model/LAUNCH_KINDS.md. B = 4, nsb = 2; element i of block b starts as b * 100 + i;
// every other byte is poison, and nothing outside the listed destinations may change.
//
// Hand layout per block: conv SD [3 x 2] (12 bytes at page offset 0), temporal [2 x 2] of
// 4-byte elements (16 bytes at page offset 12), page 64 bytes.
#include "in_place_check.h"
#include "oracle/launch.h"
#include "oracle/runner_bookkeeping.h"
#include "oracle_test_util.h"

#include "model/errors.h"

#include <gtest/gtest.h>

namespace mc::oracle {
namespace {

using model::CopyDecision;
using model::LaunchKind;
using test_util::block_elems;
using test_util::block_range;
using test_util::Elems;
using test_util::fill_blocks;
using test_util::make_case;
using test_util::set_row;
using test_util::tensor_of;

constexpr std::int32_t kConv = 0;
constexpr std::int32_t kTemporal = 1;
constexpr std::int32_t kPad = model::kPadSlot;

Elems conv_after(const model::LaunchCase& c, const model::LaunchResult& r, std::int64_t block) {
  return block_elems(r.arenas, c.layout, kConv, block);
}
Elems temporal_after(const model::LaunchCase& c, const model::LaunchResult& r, std::int64_t block) {
  return block_elems(r.arenas, c.layout, kTemporal, block);
}

CopyDecision decision(std::int32_t row, std::int32_t slot, std::int32_t tensor,
                      std::int32_t src_col, std::int32_t dst_col, std::int32_t bias,
                      std::int32_t src_block, std::int32_t dst_block, std::int64_t offset,
                      std::int64_t bytes) {
  return CopyDecision{.batch_row = row,
                      .slot = slot,
                      .tensor = tensor,
                      .group = 0,
                      .layer = 0,
                      .state = tensor,
                      .src_col = src_col,
                      .dst_col = dst_col,
                      .token_bias = bias,
                      .src_block_id = src_block,
                      .dst_block_id = dst_block,
                      .src_byte_offset = offset,
                      .bytes = bytes};
}

TEST(LaunchKinds, PostprocessV1) {
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::postprocess, 4, 4, 6, 8);
  set_row(c, 0, 0, {0, 3, 4, 5, kPad, kPad});
  set_row(c, 0, 1, {6, 7, 8, 9, kPad, kPad});
  set_row(c, 0, 2, {10, 11, 12, 13, kPad, kPad});
  set_row(c, 0, 3, {14, 15, kPad, kPad, kPad, kPad});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {3, 4, 10, 11});
  // r0: running 6+3-2 = 7, new 8, aligned 8: bias 1, dst 1 == src 1 -> a reset, same-block shift.
  // r1: running 5, new 7, aligned 4 < 5: nothing, a stays 3.
  // r2: running 4, new 4, aligned 4: bias 0, dst 0, src 1 -> copy col 1 -> col 0, a stays 1.
  // r3: running 4, new 6, aligned 4: bias 0, dst 0 == src 0 -> a reset, no copy.
  c.requests = {.num_accepted = {2, 3, 1, 3},
                .state_idx = {1, 1, 1, 0},
                .num_scheduled = {3, 3, 3, 3},
                .num_computed = {6, 4, 3, 2},
                .num_draft = {2, 2, 2, 1}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.status, model::LaunchStatus::ok);
  model::RequestArrays expected = c.requests;
  expected.num_accepted_out = {1, 3, 1, 1};
  EXPECT_EQ(r.requests, expected);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 0, kConv, 1, 1, 1, 3, 3, 4, 8),
                             decision(0, 0, kTemporal, 1, 1, 1, 4, 3, 0, 16),
                             decision(2, 2, kConv, 1, 0, 0, 11, 10, 0, 12),
                             decision(2, 2, kTemporal, 1, 0, 0, 11, 10, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 3), (Elems{302, 303, 304, 305, 304, 305}));
  EXPECT_EQ(temporal_after(c, r, 3), (Elems{400, 401, 402, 403}));
  EXPECT_EQ(conv_after(c, r, 10), (Elems{1100, 1101, 1102, 1103, 1104, 1105}));
  EXPECT_EQ(temporal_after(c, r, 10), (Elems{1100, 1101, 1102, 1103}));
  const model::StateTensor& conv = tensor_of(c.layout, kConv);
  const model::StateTensor& temporal = tensor_of(c.layout, kTemporal);
  test_util::expect_unchanged_except(c, r, 0,
                                     {block_range(conv, 3), block_range(temporal, 3),
                                      block_range(conv, 10), block_range(temporal, 10)});
}

TEST(LaunchKinds, PostprocessAlignV2DecidesFromTheSnapshotOfA) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(), LaunchKind::postprocess_align, 3, 4, 4, 4);
  set_row(c, 0, 0, {5, 6, 7, kPad});
  set_row(c, 0, 2, {9, 10, 11, kPad}); // row 1 is skipped: its pads are never read
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {6, 7, 9, 10});
  // row 0 -> slot 2: running 8-2+1 = 7, aligned 8: bias 1, dst 1 == src 1, a reset to 1.
  //   The temporal program still sees a = 2 (had it seen the reset, it would not copy).
  // row 2 -> slot 0: running 5-2+1 = 4, aligned 4: bias 0, dst 0, src 1: copy, a stays 2.
  // slot 3 is in no row: it would copy if it were processed.
  c.requests = {.idx_mapping = {2, -1, 0},
                .num_accepted = {2, 3, 2, 1},
                .state_idx = {1, 2, 1, 0},
                .new_num_computed = {5, 9, 8, 8}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  model::RequestArrays expected = c.requests;
  expected.num_accepted = {2, 3, 1, 1};
  EXPECT_EQ(r.requests, expected);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 2, kConv, 1, 1, 1, 6, 6, 4, 8),
                             decision(0, 2, kTemporal, 1, 1, 1, 7, 6, 0, 16),
                             decision(2, 0, kConv, 1, 0, 0, 10, 9, 0, 12),
                             decision(2, 0, kTemporal, 1, 0, 0, 10, 9, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 6), (Elems{602, 603, 604, 605, 604, 605}));
  EXPECT_EQ(temporal_after(c, r, 6), (Elems{700, 701, 702, 703}));
  EXPECT_EQ(conv_after(c, r, 9), (Elems{1000, 1001, 1002, 1003, 1004, 1005}));
  EXPECT_EQ(temporal_after(c, r, 9), (Elems{1000, 1001, 1002, 1003}));
  const model::StateTensor& conv = tensor_of(c.layout, kConv);
  const model::StateTensor& temporal = tensor_of(c.layout, kTemporal);
  test_util::expect_unchanged_except(c, r, 0,
                                     {block_range(conv, 6), block_range(temporal, 6),
                                      block_range(conv, 9), block_range(temporal, 9)});
}

TEST(LaunchKinds, PrecopyV2) {
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::precopy, 4, 4, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  set_row(c, 0, 1, {5, 6, 7, 8});
  set_row(c, 0, 2, {9, 10, 11, 12});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {1, 2, 3});
  // row 0 -> slot 1: 0 -> 1 with bias 2; conv moves token 2 of block 1 to token 0 of block 2;
  //   temporal copies column 0 + 2 (block 3) to column 1 (block 2).
  // row 1 -> slot 0: src -1 (fresh). row 2 -> slot 3: src == dst. row 3: idx_mapping -1.
  c.requests = {.idx_mapping = {1, 0, 3, -1},
                .state_idx = {1, 1, 3, 2},
                .src_col = {-1, 0, 0, 2},
                .token_bias = {0, 2, 1, 1}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.requests, c.requests);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 1, kConv, 0, 1, 2, 1, 2, 8, 4),
                             decision(0, 1, kTemporal, 0, 1, 2, 3, 2, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 2), (Elems{104, 105, 202, 203, 204, 205}));
  EXPECT_EQ(temporal_after(c, r, 2), (Elems{300, 301, 302, 303}));
  test_util::expect_unchanged_except(
      c, r, 0,
      {block_range(tensor_of(c.layout, kConv), 2), block_range(tensor_of(c.layout, kTemporal), 2)});
}

// vLLM's V1 fused pre-copy: no idx_mapping, row b reads slot b and table row b; the rows that
// copy nothing come marked src_col -1, bias 0, as the V1 runner stages them.
TEST(LaunchKinds, PrecopyV1IndexesRowsDirectly) {
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::precopy_v1, 3, 3, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  set_row(c, 0, 1, {5, 6, 7, 8});
  set_row(c, 0, 2, {9, 10, 11, 12});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {1, 2, 3, 9, 10});
  // row 0: prev 0 -> curr 1 with bias a - 1 = 2. rows 1 (fresh) and 2 (same column): -1, 0.
  c.requests = {.state_idx = {1, 0, 2}, .src_col = {0, -1, -1}, .token_bias = {2, 0, 0}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.status, model::LaunchStatus::ok);
  EXPECT_EQ(r.requests, c.requests);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 0, kConv, 0, 1, 2, 1, 2, 8, 4),
                             decision(0, 0, kTemporal, 0, 1, 2, 3, 2, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 2), (Elems{104, 105, 202, 203, 204, 205}));
  EXPECT_EQ(temporal_after(c, r, 2), (Elems{300, 301, 302, 303}));
  test_util::expect_unchanged_except(
      c, r, 0,
      {block_range(tensor_of(c.layout, kConv), 2), block_range(tensor_of(c.layout, kTemporal), 2)});
}

TEST(LaunchKinds, PrecopyV1TakesNoIdxMapping) {
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::precopy_v1, 1, 1, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  c.requests = {.idx_mapping = {0}, .state_idx = {1}, .src_col = {-1}, .token_bias = {0}};
  try {
    (void)run_launch(c);
    FAIL() << "expected InputError";
  } catch (const model::InputError& e) {
    EXPECT_STREQ(e.what(), "launch precopy_v1: array idx_mapping has 1 entries, expected 0");
  }
}

// The same arrays and tables under both table conventions. Rows 0 and 1 map to slots 2 and 0;
// table row r holds slot r's request (row 1: slot 1's last occupant, a free slot now).
model::LaunchCase two_conventions_case(LaunchKind kind) {
  model::LaunchCase c = make_case(test_util::hand_layout(), kind, 2, 3, 4, 4);
  c.block_tables.groups[0] = model::BlockTable::make(3, 4, 4); // a row per slot
  set_row(c, 0, 0, {5, 6, 7, 8});
  set_row(c, 0, 1, {13, 14, 15, 16});
  set_row(c, 0, 2, {1, 2, 3, 4});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {1, 2, 3, 5, 6, 7, 14, 15});
  // slot 2: 0 -> 1 with bias 2. slot 0: 1 -> 2 with bias 0. slot 1 is in no row.
  c.requests = {.idx_mapping = {2, 0},
                .state_idx = {2, 0, 1},
                .src_col = {1, -1, 0},
                .token_bias = {0, 0, 2}};
  return c;
}

TEST(LaunchKinds, PrecopySlotTablesFindEachRowsTableAtItsSlot) {
  const model::LaunchCase c = two_conventions_case(LaunchKind::precopy_slot_tables);
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.requests, c.requests);
  // Row 0 (slot 2) reads table row 2, row 1 (slot 0) table row 0.
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 2, kConv, 0, 1, 2, 1, 2, 8, 4),
                             decision(0, 2, kTemporal, 0, 1, 2, 3, 2, 0, 16),
                             decision(1, 0, kConv, 1, 2, 0, 6, 7, 0, 12),
                             decision(1, 0, kTemporal, 1, 2, 0, 6, 7, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 2), (Elems{104, 105, 202, 203, 204, 205}));
  EXPECT_EQ(temporal_after(c, r, 2), (Elems{300, 301, 302, 303}));
  EXPECT_EQ(conv_after(c, r, 7), (Elems{600, 601, 602, 603, 604, 605}));
  EXPECT_EQ(temporal_after(c, r, 7), (Elems{600, 601, 602, 603}));
  const model::StateTensor& conv = tensor_of(c.layout, kConv);
  const model::StateTensor& temporal = tensor_of(c.layout, kTemporal);
  test_util::expect_unchanged_except(c, r, 0,
                                     {block_range(conv, 2), block_range(temporal, 2),
                                      block_range(conv, 7), block_range(temporal, 7)});
}

TEST(LaunchKinds, PrecopyWithTablesByBatchRowReadsRowB) {
  // The seed's convention on the same tables: row b's table is row b, whichever slot it has.
  const model::LaunchCase c = two_conventions_case(LaunchKind::precopy);
  const model::LaunchResult r = test_util::run_launch_checked(c);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 2, kConv, 0, 1, 2, 5, 6, 8, 4),
                             decision(0, 2, kTemporal, 0, 1, 2, 7, 6, 0, 16),
                             decision(1, 0, kConv, 1, 2, 0, 14, 15, 0, 12),
                             decision(1, 0, kTemporal, 1, 2, 0, 14, 15, 0, 16),
                         }));
}

TEST(LaunchKinds, PostprocessAlignSlotTablesFindEachRowsTableAtItsSlot) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(), LaunchKind::postprocess_align_slot_tables, 1, 2, 4, 4);
  c.block_tables.groups[0] = model::BlockTable::make(2, 4, 4);
  set_row(c, 0, 0, {20, 21, 22, 23}); // slot 0: another request, not in this batch
  set_row(c, 0, 1, {5, 6, 7, kPad});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {5, 6, 7, 20, 21});
  // row 0 -> slot 1: running 5 - 2 + 1 = 4, aligned 4: bias 0, dst 0, src 1: copy col 1 -> 0.
  c.requests = {
      .idx_mapping = {1}, .num_accepted = {1, 2}, .state_idx = {1, 1}, .new_num_computed = {9, 5}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.requests, c.requests);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 1, kConv, 1, 0, 0, 6, 5, 0, 12),
                             decision(0, 1, kTemporal, 1, 0, 0, 6, 5, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 5), (Elems{600, 601, 602, 603, 604, 605}));
  EXPECT_EQ(temporal_after(c, r, 5), (Elems{600, 601, 602, 603}));
  test_util::expect_unchanged_except(
      c, r, 0,
      {block_range(tensor_of(c.layout, kConv), 5), block_range(tensor_of(c.layout, kTemporal), 5)});
}

TEST(LaunchKinds, SlotTablesNeedARowPerSlot) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(), LaunchKind::postprocess_align_slot_tables, 1, 2, 4, 4);
  c.requests = {
      .idx_mapping = {1}, .num_accepted = {1, 2}, .state_idx = {1, 1}, .new_num_computed = {9, 5}};
  try {
    (void)run_launch(c);
    FAIL() << "expected InputError";
  } catch (const model::InputError& e) {
    EXPECT_STREQ(e.what(), "launch postprocess_align_slot_tables: block table of group 0 has 1 "
                           "rows for 2 slots (its rows are found by slot)");
  }
}

TEST(LaunchKinds, PreprocessAlignV2IsBookkeepingOnly) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(), LaunchKind::preprocess_align, 4, 5, 4, 4);
  // row 0 -> slot 3: old 1, a 3, 6 + 3 tokens -> cdiv(9, 4) - 1 = 2: changed, a reset.
  // row 1 -> slot 0: fresh (-1), a 0 -> bias max(-1, 0) = 0; cdiv(0 + 1, 4) - 1 = 0; no reset.
  // row 2: skipped. row 3 -> slot 1: old 2, 9 + 2 tokens -> cdiv(11, 4) - 1 = 2: same, a kept.
  // slots 2 and 4 are in no row and keep everything.
  c.requests = {.idx_mapping = {3, 0, -1, 1},
                .num_accepted = {0, 3, 2, 3, 2},
                .state_idx = {-1, 2, 5, 1, 6},
                .num_computed = {0, 9, 4, 6, 8},
                .query_start_loc = {0, 3, 4, 4, 6},
                .src_col = {7, 7, 7, 7, 7},
                .token_bias = {9, 9, 9, 9, 9}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  model::RequestArrays expected = c.requests;
  expected.src_col = {-1, 2, 7, 1, 7};
  expected.token_bias = {0, 2, 9, 2, 9};
  expected.state_idx = {0, 2, 5, 2, 6};
  expected.num_accepted = {0, 3, 2, 1, 2};
  EXPECT_EQ(r.requests, expected);
  EXPECT_TRUE(r.decisions.empty());
  test_util::expect_unchanged_except(c, r, 0, {});
}

TEST(LaunchKinds, BatchCopyV1Sd) {
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::batch_copy, 3, 3, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  set_row(c, 0, 1, {5, 6, 7, 8});
  set_row(c, 0, 2, {9, 10, 11, 12});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {1, 2, 3});
  // row 0: prev 0 -> curr 1, bias a - 1 = 2. row 1: fresh. row 2: prev == curr.
  c.requests = {.state_idx = {1, 0, 2}, .src_col = {0, -1, 2}, .token_bias = {2, 0, 1}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.status, model::LaunchStatus::ok);
  EXPECT_EQ(r.requests, c.requests);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 0, kConv, 0, 1, 2, 1, 2, 8, 4),
                             decision(0, 0, kTemporal, 0, 1, 2, 3, 2, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 2), (Elems{104, 105, 202, 203, 204, 205}));
  EXPECT_EQ(temporal_after(c, r, 2), (Elems{300, 301, 302, 303}));
  test_util::expect_unchanged_except(
      c, r, 0,
      {block_range(tensor_of(c.layout, kConv), 2), block_range(tensor_of(c.layout, kTemporal), 2)});
}

TEST(LaunchKinds, BatchCopyV1DsWithoutBiasCopiesTheWholeBlock) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(model::ConvLayout::DS), LaunchKind::batch_copy, 1, 1, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {1, 2});
  c.requests = {.state_idx = {1}, .src_col = {0}, .token_bias = {0}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.status, model::LaunchStatus::ok);
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 0, kConv, 0, 1, 0, 1, 2, 0, 12),
                             decision(0, 0, kTemporal, 0, 1, 0, 1, 2, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 2), (Elems{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(temporal_after(c, r, 2), (Elems{100, 101, 102, 103}));
}

TEST(LaunchKinds, BatchCopyV1DsWithBiasIsUnsupportedAndCopiesNothing) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(model::ConvLayout::DS), LaunchKind::batch_copy, 2, 2, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  set_row(c, 0, 1, {5, 6, 7, 8});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {1, 2, 3, 5, 6});
  // Row 0 alone would be fine (bias 0); row 1 has bias 1 on a DS conv state.
  c.requests = {.state_idx = {1, 1}, .src_col = {0, 0}, .token_bias = {0, 1}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  EXPECT_EQ(r.status, model::LaunchStatus::unsupported);
  EXPECT_NE(r.unsupported_reason.find("request row 1"), std::string::npos) << r.unsupported_reason;
  EXPECT_NE(r.unsupported_reason.find("tensor 0"), std::string::npos) << r.unsupported_reason;
  EXPECT_TRUE(r.decisions.empty());
  EXPECT_EQ(r.requests, c.requests);
  test_util::expect_unchanged_except(c, r, 0, {});
}

// Seed 000's preprocess_mamba corner case: B = 4, two drafts, request [A, B, C] + 2 drafts.
// Block 0: [A, B, C, d1], block 1: [d2, ...], blocks 2 and 3 speculative: the running
// state is saved in block 1. When both drafts are accepted, the post-step save copies the
// state after 4 tokens (temporal: window column 1 + bias 1; conv: block 1 shifted by 1)
// into column 0.
TEST(LaunchKinds, SeedCornerCaseRunningStateInBlockOne) {
  MambaStateIdx state_idx;
  const std::vector<BatchRequest> batch{{.req_id = "abc",
                                         .num_computed_tokens = 2,
                                         .num_scheduled_tokens = 3,
                                         .num_accepted_tokens = 1}};
  const PreprocessPlan plan = preprocess_mamba({}, batch, 4, 2, state_idx);
  EXPECT_EQ(plan.state_idx, (std::vector<std::int32_t>{1}));
  EXPECT_EQ(plan.src_col, (std::vector<std::int32_t>{0})); // (2 - 1) // 4
  EXPECT_EQ(state_idx.at("abc"), 1);

  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::postprocess, 1, 1, 4, 4);
  set_row(c, 0, 0, {2, 5, 8, 11});
  for (std::int32_t t : {kConv, kTemporal})
    fill_blocks(c, t, {2, 5, 8, 11});
  // running = 2 + 3 - 2 = 3, a = 3: new 5, aligned 4: bias 1, dst 0, src 1.
  c.requests = {.num_accepted = {3},
                .state_idx = {plan.state_idx[0]},
                .num_scheduled = {3},
                .num_computed = {2},
                .num_draft = {2}};
  const model::LaunchResult r = test_util::run_launch_checked(c);
  EXPECT_EQ(r.requests.num_accepted_out, (std::vector<std::int32_t>{3}));
  EXPECT_EQ(r.decisions, (std::vector<CopyDecision>{
                             decision(0, 0, kConv, 1, 0, 1, 5, 2, 4, 8),
                             decision(0, 0, kTemporal, 1, 0, 1, 8, 2, 0, 16),
                         }));
  EXPECT_EQ(conv_after(c, r, 2), (Elems{502, 503, 504, 505, 204, 205}));
  EXPECT_EQ(temporal_after(c, r, 2), (Elems{800, 801, 802, 803}));
}

} // namespace
} // namespace mc::oracle
