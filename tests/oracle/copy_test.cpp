// The copy of one state, corner by corner (REFERENCE.md 2, class D), bytes worked out by hand.
#include "in_place_check.h"
#include "oracle/launch.h"
#include "oracle_test_util.h"

#include <gtest/gtest.h>

namespace mc::oracle {
namespace {

using model::LaunchKind;
using test_util::block_elems;
using test_util::block_range;
using test_util::Elems;
using test_util::fill_blocks;
using test_util::make_case;
using test_util::set_row;
using test_util::tensor_of;

constexpr std::int32_t kPad = model::kPadSlot;

// A same-block shift through postprocess_align: new_num_computed 4, a = bias + 1, so
// running = 4 - bias, aligned 4, dst column 0 == state_idx 0. Block 7 holds 700 + i.
model::LaunchResult shift_in_place(const model::Layout& layout, std::int32_t bias,
                                   model::LaunchCase& c) {
  c = make_case(layout, LaunchKind::postprocess_align, 1, 1, 2, 2);
  set_row(c, 0, 0, {7, kPad});
  fill_blocks(c, 0, {7});
  c.requests = {
      .idx_mapping = {0}, .num_accepted = {bias + 1}, .state_idx = {0}, .new_num_computed = {4}};
  return test_util::run_launch_checked(c);
}

// SD window [5 x 2]: token row k of block 7 is (700 + 2k, 701 + 2k).
TEST(Copy, SameBlockSdShiftIsAMemmove) {
  const model::Layout layout = test_util::window_layout(model::ConvLayout::SD);
  const std::vector<Elems> expected{
      {702, 703, 704, 705, 706, 707, 708, 709, 708, 709},  // bias 1: rows 1..4 -> 0..3
      {704, 705, 706, 707, 708, 709, 706, 707, 708, 709},  // bias 2: rows 2..4 -> 0..2
      {706, 707, 708, 709, 704, 705, 706, 707, 708, 709}}; // bias 3: rows 3..4 -> 0..1
  for (std::int32_t bias = 1; bias <= 3; ++bias) {
    SCOPED_TRACE(bias);
    model::LaunchCase c;
    const model::LaunchResult r = shift_in_place(layout, bias, c);
    EXPECT_EQ(block_elems(r.arenas, layout, 0, 7), expected[static_cast<std::size_t>(bias - 1)]);
    ASSERT_EQ(r.decisions.size(), 1u);
    EXPECT_EQ(r.decisions[0].src_byte_offset, bias * 2 * 2);
    EXPECT_EQ(r.decisions[0].bytes, (5 - bias) * 2 * 2);
    EXPECT_EQ(r.requests.num_accepted, (std::vector<std::int32_t>{1})); // src == dst: reset
    test_util::expect_unchanged_except(c, r, 0, {block_range(tensor_of(layout, 0), 7)});
  }
}

// DS window [2 x 5]: dim row d of block 7 is 700 + 5d + k for token k.
TEST(Copy, SameBlockDsShiftIsAMemmovePerDimRow) {
  const model::Layout layout = test_util::window_layout(model::ConvLayout::DS);
  const std::vector<Elems> expected{{701, 702, 703, 704, 704, 706, 707, 708, 709, 709},  // bias 1
                                    {702, 703, 704, 703, 704, 707, 708, 709, 708, 709},  // bias 2
                                    {703, 704, 702, 703, 704, 708, 709, 707, 708, 709}}; // bias 3
  for (std::int32_t bias = 1; bias <= 3; ++bias) {
    SCOPED_TRACE(bias);
    model::LaunchCase c;
    const model::LaunchResult r = shift_in_place(layout, bias, c);
    EXPECT_EQ(block_elems(r.arenas, layout, 0, 7), expected[static_cast<std::size_t>(bias - 1)]);
    ASSERT_EQ(r.decisions.size(), 1u);
    EXPECT_EQ(r.decisions[0].src_byte_offset, bias * 2); // within each dim row
    EXPECT_EQ(r.decisions[0].bytes, 2 * (5 - bias) * 2); // both dim rows together
    test_util::expect_unchanged_except(c, r, 0, {block_range(tensor_of(layout, 0), 7)});
  }
}

// A bias at least the window length moves nothing but is still a recorded decision.
TEST(Copy, BiasPastTheWindowIsAnEmptySlice) {
  const model::Layout layout = test_util::hand_layout(); // conv window 3 tokens
  model::LaunchCase c = make_case(layout, LaunchKind::precopy, 1, 1, 6, 6);
  set_row(c, 0, 0, {1, 2, 3, 4, 5, 6});
  for (std::int32_t t : {0, 1})
    fill_blocks(c, t, {1, 2, 4});
  c.requests = {.idx_mapping = {0}, .state_idx = {1}, .src_col = {0}, .token_bias = {3}};
  const model::LaunchResult r = test_util::run_launch_checked(c);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].bytes, 0);
  EXPECT_EQ(r.decisions[0].src_byte_offset, 3 * 2 * 2);
  EXPECT_EQ(block_elems(r.arenas, layout, 0, 2), (Elems{200, 201, 202, 203, 204, 205}));
  EXPECT_EQ(block_elems(r.arenas, layout, 1, 2), (Elems{400, 401, 402, 403})); // column 0 + 3
  test_util::expect_unchanged_except(c, r, 0, {block_range(tensor_of(layout, 1), 2)});
}

// The temporal state sits at page offset 12, 16 natural bytes, in a 64-byte page: the copy
// moves 16 bytes and leaves the 36 padding bytes (and the next page) as they were.
TEST(Copy, PagePaddedTemporalCopiesNaturalBytesOnly) {
  const model::Layout layout = test_util::hand_layout();
  const model::StateTensor& temporal = tensor_of(layout, 1);
  ASSERT_EQ(temporal.natural_bytes, 16);
  ASSERT_EQ(temporal.block_stride_bytes, 64);
  model::LaunchCase c = make_case(layout, LaunchKind::precopy, 1, 1, 4, 4);
  set_row(c, 0, 0, {3, 9, 10, 11});
  fill_blocks(c, 1, {3});
  c.requests = {.idx_mapping = {0}, .state_idx = {1}, .src_col = {0}, .token_bias = {0}};
  const model::LaunchResult r = test_util::run_launch_checked(c);
  EXPECT_EQ(block_elems(r.arenas, layout, 1, 9), (Elems{300, 301, 302, 303}));
  const std::int64_t page9 = 9 * 64;
  for (std::int64_t off = page9 + 28; off < page9 + 64; ++off)
    EXPECT_EQ(static_cast<std::uint8_t>(r.arenas[0].data()[off]), model::poison_byte(off)) << off;
  test_util::expect_unchanged_except(
      c, r, 0, {block_range(tensor_of(layout, 0), 9), block_range(temporal, 9)});
}

// Prefix caching: columns 0 and 1 both hold block 7. The decision is on columns: src 1 !=
// dst 0, so the state is copied (here a same-block shift) and a is NOT reset.
TEST(Copy, AliasedColumnsDecideOnColumnsNotBlocks) {
  const model::Layout layout = test_util::hand_layout();
  model::LaunchCase c = make_case(layout, LaunchKind::postprocess_align, 1, 1, 4, 4);
  set_row(c, 0, 0, {7, 7, 9, kPad});
  for (std::int32_t t : {0, 1})
    fill_blocks(c, t, {7, 9});
  // running 5 - 3 + 1 = 3, aligned 4: bias 1, dst 0, src 1.
  c.requests = {.idx_mapping = {0}, .num_accepted = {3}, .state_idx = {1}, .new_num_computed = {5}};
  const model::LaunchResult r = test_util::run_launch_checked(c);
  EXPECT_EQ(r.requests.num_accepted, (std::vector<std::int32_t>{3}));
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].src_block_id, 7);
  EXPECT_EQ(r.decisions[0].dst_block_id, 7);
  EXPECT_EQ(r.decisions[1].src_block_id, 9); // temporal: column 1 + 1
  EXPECT_EQ(r.decisions[1].dst_block_id, 7);
  EXPECT_EQ(block_elems(r.arenas, layout, 0, 7), (Elems{702, 703, 704, 705, 704, 705}));
  EXPECT_EQ(block_elems(r.arenas, layout, 1, 7), (Elems{900, 901, 902, 903}));
}

// Rows 9 entries apart, 5 meaningful: row 1 starts at element 9, and the gap holds
// kStrideGapFill. Reading row 1 with the width as its stride would read the gap.
TEST(Copy, BlockTableRowStrideExceedsWidth) {
  const model::Layout layout = test_util::hand_layout();
  model::LaunchCase c = make_case(layout, LaunchKind::batch_copy, 2, 2, 5, 9);
  set_row(c, 0, 0, {1, 2, 3, 4, 5});
  set_row(c, 0, 1, {6, 7, 8, 10, 11});
  for (std::int32_t t : {0, 1})
    fill_blocks(c, t, {1, 2, 3, 4, 5, 6, 7, 8, 10, 11});
  c.requests = {.state_idx = {-1, 3}, .src_col = {-1, 1}, .token_bias = {0, 1}};
  const model::LaunchResult r = test_util::run_launch_checked(c);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].src_block_id, 7);
  EXPECT_EQ(r.decisions[0].dst_block_id, 10);
  EXPECT_EQ(r.decisions[1].src_block_id, 8);
  EXPECT_EQ(block_elems(r.arenas, layout, 0, 10), (Elems{702, 703, 704, 705, 1004, 1005}));
  EXPECT_EQ(block_elems(r.arenas, layout, 1, 10), (Elems{800, 801, 802, 803}));
  test_util::expect_unchanged_except(
      c, r, 0, {block_range(tensor_of(layout, 0), 10), block_range(tensor_of(layout, 1), 10)});
}

// The same copy with every element size: all bytes of each element move, none else.
TEST(Copy, ElementSizesTwoFourEight) {
  for (std::int32_t conv_size : {2, 4, 8}) {
    for (std::int32_t temporal_size : {2, 4, 8}) {
      SCOPED_TRACE(::testing::Message() << conv_size << " " << temporal_size);
      const model::Layout layout =
          test_util::hand_layout(model::ConvLayout::SD, conv_size, temporal_size);
      model::LaunchCase c = make_case(layout, LaunchKind::precopy, 1, 1, 4, 4);
      set_row(c, 0, 0, {1, 2, 3, 4});
      for (std::int32_t t : {0, 1})
        fill_blocks(c, t, {1, 2, 3});
      // Column 0 -> column 2 with bias 1: conv block 1 from token 1 -> block 3; temporal
      // column 1 (block 2) -> block 3.
      c.requests = {.idx_mapping = {0}, .state_idx = {2}, .src_col = {0}, .token_bias = {1}};
      const model::LaunchResult r = test_util::run_launch_checked(c);
      EXPECT_EQ(block_elems(r.arenas, layout, 0, 3), (Elems{102, 103, 104, 105, 304, 305}));
      EXPECT_EQ(block_elems(r.arenas, layout, 1, 3), (Elems{200, 201, 202, 203}));
      ASSERT_EQ(r.decisions.size(), 2u);
      EXPECT_EQ(r.decisions[0].bytes, 2 * 2 * conv_size);
      EXPECT_EQ(r.decisions[1].bytes, 4 * temporal_size);
      test_util::expect_unchanged_except(
          c, r, 0, {block_range(tensor_of(layout, 0), 3), block_range(tensor_of(layout, 1), 3)});
    }
  }
}

} // namespace
} // namespace mc::oracle
