// Layouts that stress geometry: offsets past 2^32 bytes (class B) and several groups with
// different state tuples and element sizes (REFERENCE.md 1).
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
using test_util::set_elem;
using test_util::set_row;
using test_util::tensor_of;

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// The hand mamba1 layer in one shared page padded to 64 MiB, 66 blocks: 4.125 GiB, mapped
// lazily. Block 64 starts at exactly 2^32 bytes, block 65 past it; a 32-bit product
// 65 * 2^26 would wrap to block 1.
model::Layout huge_layout() {
  model::GroupSpec group{.name = "huge",
                         .family = model::Family::mamba1,
                         .params = {.intermediate_size = 2, .state_size = 2, .conv_kernel = 4},
                         .num_layers = 1,
                         .conv_elem_size = 2,
                         .temporal_elem_size = 4,
                         .page_policy = model::PagePolicy::shared,
                         .page_align_bytes = 64 * kMiB};
  return model::build_layout(test_util::hand_config(), {.groups = {group}, .num_blocks = 66});
}

TEST(LayoutCases, OffsetsPastFourGiB) {
  const model::Layout layout = huge_layout();
  ASSERT_EQ(layout.arenas.size(), 1u);
  ASSERT_EQ(tensor_of(layout, 0).block_stride_bytes, 64 * kMiB);
  ASSERT_GT(tensor_of(layout, 0).block_offset_bytes(65), std::int64_t{1} << 32);
  // Built by hand, not with make_case: poisoning 4 GiB would touch every page.
  model::LaunchCase c{.layout = layout, .kind = LaunchKind::precopy, .num_reqs = 1, .num_slots = 1};
  c.block_tables.groups.push_back(model::BlockTable::make(1, 4, 4));
  c.arenas.emplace_back(layout.arenas[0].size_bytes());
  for (std::int64_t block : {0, 1, 63, 64, 65})
    c.arenas[0].poison_range(block * 64 * kMiB, 256);
  set_row(c, 0, 0, {64, 65, 63, 1});
  for (std::int32_t t : {0, 1})
    fill_blocks(c, t, {1, 63, 64, 65});
  // Column 1 -> column 0 with bias 1: conv block 65 from token 1 -> block 64; temporal
  // column 2 (block 63) -> block 64.
  c.requests = {.idx_mapping = {0}, .state_idx = {0}, .src_col = {1}, .token_bias = {1}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].src_block_id, 65);
  EXPECT_EQ(r.decisions[0].dst_block_id, 64);
  EXPECT_EQ(r.decisions[1].src_block_id, 63);
  EXPECT_EQ(block_elems(r.arenas, layout, 0, 64), (Elems{6502, 6503, 6504, 6505, 6404, 6405}));
  EXPECT_EQ(block_elems(r.arenas, layout, 1, 64), (Elems{6300, 6301, 6302, 6303}));
  // Everything else, block 1 (where a wrapped offset would land) included, is unchanged.
  model::Arena expected = c.arenas[0].clone();
  const Elems conv64{6502, 6503, 6504, 6505};
  for (std::size_t i = 0; i < conv64.size(); ++i)
    set_elem(expected, tensor_of(layout, 0), 64, static_cast<std::int64_t>(i), conv64[i]);
  for (std::int64_t i = 0; i < 4; ++i)
    set_elem(expected, tensor_of(layout, 1), 64, i, 6300 + i);
  EXPECT_EQ(expected.first_difference(r.arenas[0]), -1);
}

// tiny-mixed: group 0 mamba2 (2 layers: conv SD [3 x 8] fp16, temporal 8 x fp32, 96-byte
// pages), group 1 short_conv (conv [2 x 5] fp64), group 2 kda (three conv [1 x 3] fp32 and a
// recurrent 9 x fp16 in 32-byte strides). Each group reads its own block table.
TEST(LayoutCases, SeveralGroupsWithDifferentStateTuples) {
  const model::Layout layout = test_util::preset_layout("tiny-mixed");
  ASSERT_EQ(layout.tensors.size(), 9u);
  model::LaunchCase c = test_util::make_case(layout, LaunchKind::postprocess, 1, 1, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  set_row(c, 1, 0, {5, 6, 7, 8});
  set_row(c, 2, 0, {9, 10, 11, 12});
  for (std::int32_t t : {0, 1, 2, 3})
    fill_blocks(c, t, {1, 2, 3});
  fill_blocks(c, 4, {5, 6, 7});
  for (std::int32_t t : {5, 6, 7, 8})
    fill_blocks(c, t, {9, 10, 11});
  // running 1 + 4 - 2 = 3, a = 2: new 4, aligned 4: bias 1, dst column 0, src column 1.
  c.requests = {.num_accepted = {2},
                .state_idx = {1},
                .num_scheduled = {4},
                .num_computed = {1},
                .num_draft = {2}};
  const model::LaunchResult r = test_util::run_launch_checked(c);

  ASSERT_EQ(r.decisions.size(), 9u);
  const std::vector<std::int32_t> groups{0, 0, 0, 0, 1, 2, 2, 2, 2};
  const std::vector<std::int32_t> src_blocks{2, 3, 2, 3, 6, 10, 10, 10, 11};
  const std::vector<std::int32_t> dst_blocks{1, 1, 1, 1, 5, 9, 9, 9, 9};
  const std::vector<std::int64_t> bytes{32, 32, 32, 32, 40, 0, 0, 0, 18};
  for (std::size_t i = 0; i < 9; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.decisions[i].tensor, static_cast<std::int32_t>(i));
    EXPECT_EQ(r.decisions[i].group, groups[i]);
    EXPECT_EQ(r.decisions[i].src_block_id, src_blocks[i]);
    EXPECT_EQ(r.decisions[i].dst_block_id, dst_blocks[i]);
    EXPECT_EQ(r.decisions[i].bytes, bytes[i]);
  }
  for (std::int32_t t : {0, 2}) { // token rows 1..2 of block 2 -> rows 0..1 of block 1
    Elems conv;
    for (std::uint64_t v = 208; v < 224; ++v)
      conv.push_back(v);
    for (std::uint64_t v = 116; v < 124; ++v)
      conv.push_back(v);
    EXPECT_EQ(block_elems(r.arenas, layout, t, 1), conv);
  }
  for (std::int32_t t : {1, 3})
    EXPECT_EQ(block_elems(r.arenas, layout, t, 1), (Elems{300, 301, 302, 303, 304, 305, 306, 307}));
  EXPECT_EQ(block_elems(r.arenas, layout, 4, 5),
            (Elems{605, 606, 607, 608, 609, 505, 506, 507, 508, 509}));
  for (std::int32_t t : {5, 6, 7}) // a window of one token shifted by one: nothing moves
    EXPECT_EQ(block_elems(r.arenas, layout, t, 9), (Elems{900, 901, 902}));
  EXPECT_EQ(block_elems(r.arenas, layout, 8, 9),
            (Elems{1100, 1101, 1102, 1103, 1104, 1105, 1106, 1107, 1108}));
  for (std::size_t a = 0; a < c.arenas.size(); ++a) {
    SCOPED_TRACE(a);
    std::vector<std::pair<std::int64_t, std::int64_t>> written;
    for (const model::CopyDecision& d : r.decisions)
      if (tensor_of(layout, d.tensor).arena == static_cast<std::int32_t>(a))
        written.push_back(block_range(tensor_of(layout, d.tensor), d.dst_block_id));
    EXPECT_EQ(test_util::first_difference_outside(c.arenas[a], r.arenas[a], written), -1);
  }
}

} // namespace
} // namespace mc::oracle
