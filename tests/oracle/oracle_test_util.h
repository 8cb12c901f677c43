// Helpers for the oracle tests: small layouts worked out by hand, cases with poisoned
// arenas, and element access written independently of the oracle (plain byte copies, no
// Eigen), so a test checks the oracle against arithmetic done here, not against itself.
#pragma once

#include "model/block_table.h"
#include "model/launch.h"
#include "model/layout.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace mc::oracle::test_util {

using Elems = std::vector<std::uint64_t>;

inline model::CacheConfig hand_config(model::ConvLayout conv_layout = model::ConvLayout::SD) {
  return model::CacheConfig{.mamba_block_size = 4,
                            .attn_block_size = 2,
                            .num_spec_tokens = 2,
                            .num_spec_blocks = 2,
                            .conv_layout = conv_layout};
}

// The hand layout: one mamba1 layer, dim 2, d_state 2, conv kernel 4, so per block
//   conv      SD [3 x 2] (DS [2 x 3]) of 2-byte elements: 12 bytes at page offset 0,
//   temporal  [2 x 2] of 4-byte elements: 16 bytes at page offset 12,
// in one shared 64-byte page (36 bytes of padding after the temporal state).
// Tensors: 0 = conv, 1 = temporal. 16 blocks.
inline model::Layout hand_layout(model::ConvLayout conv_layout = model::ConvLayout::SD,
                                 std::int32_t conv_elem_size = 2,
                                 std::int32_t temporal_elem_size = 4) {
  model::GroupSpec group{.name = "hand",
                         .family = model::Family::mamba1,
                         .params = {.intermediate_size = 2, .state_size = 2, .conv_kernel = 4},
                         .num_layers = 1,
                         .conv_elem_size = conv_elem_size,
                         .temporal_elem_size = temporal_elem_size,
                         .page_policy = model::PagePolicy::shared,
                         .page_align_bytes = 64};
  return model::build_layout(hand_config(conv_layout), {.groups = {group}, .num_blocks = 16});
}

// A short_conv window of 5 tokens x dim 2 (2-byte elements), for same-block shifts of 1..3.
inline model::Layout window_layout(model::ConvLayout conv_layout) {
  model::GroupSpec group{.name = "window",
                         .family = model::Family::short_conv,
                         .params = {.intermediate_size = 2, .conv_kernel = 6},
                         .num_layers = 1,
                         .conv_elem_size = 2,
                         .temporal_elem_size = 2};
  return model::build_layout(hand_config(conv_layout), {.groups = {group}, .num_blocks = 16});
}

inline model::Layout preset_layout(std::string_view name,
                                   model::ConvLayout conv_layout = model::ConvLayout::SD) {
  const model::Preset& p = model::find_preset(name);
  model::CacheConfig config = p.config;
  config.conv_layout = conv_layout;
  return model::build_layout(config, p.spec);
}

// A case with every arena poisoned and every table row pad-filled (stride gaps marked).
inline model::LaunchCase make_case(model::Layout layout, model::LaunchKind kind,
                                   std::int32_t num_reqs, std::int32_t num_slots,
                                   std::int32_t row_width, std::int32_t row_stride) {
  model::LaunchCase c{
      .layout = std::move(layout), .kind = kind, .num_reqs = num_reqs, .num_slots = num_slots};
  for (std::int32_t g = 0; g < c.layout.num_groups(); ++g)
    c.block_tables.groups.push_back(model::BlockTable::make(num_reqs, row_width, row_stride));
  for (const model::ArenaSpec& spec : c.layout.arenas) {
    c.arenas.emplace_back(spec.size_bytes());
    c.arenas.back().poison();
  }
  return c;
}

inline void set_row(model::LaunchCase& c, std::int32_t group, std::int32_t row,
                    const std::vector<std::int32_t>& block_ids) {
  model::BlockTable& table = c.block_tables.groups[static_cast<std::size_t>(group)];
  for (std::size_t col = 0; col < block_ids.size(); ++col)
    table.at(row, static_cast<std::int32_t>(col)) = block_ids[col];
}

inline const model::StateTensor& tensor_of(const model::Layout& layout, std::int32_t tensor) {
  return layout.tensors[static_cast<std::size_t>(tensor)];
}

// Arena byte offset of element `index` (row-major natural order) of block `block_id`.
inline std::int64_t elem_offset(const model::StateTensor& t, std::int64_t block_id,
                                std::int64_t index) {
  return t.offset_bytes + block_id * t.block_stride_bytes + index * t.elem_size;
}

inline std::uint64_t get_elem(const model::Arena& arena, const model::StateTensor& t,
                              std::int64_t block_id, std::int64_t index) {
  std::uint64_t value = 0; // little-endian host: the low elem_size bytes
  std::memcpy(&value, arena.data() + elem_offset(t, block_id, index),
              static_cast<std::size_t>(t.elem_size));
  return value;
}

inline void set_elem(model::Arena& arena, const model::StateTensor& t, std::int64_t block_id,
                     std::int64_t index, std::uint64_t value) {
  std::memcpy(arena.data() + elem_offset(t, block_id, index), &value,
              static_cast<std::size_t>(t.elem_size));
}

inline std::int64_t natural_elems(const model::StateTensor& t) {
  return t.natural_bytes / t.elem_size;
}

// Element i of block b holds b * 100 + i, so every value names where it came from.
inline void fill_block(model::LaunchCase& c, std::int32_t tensor, std::int64_t block_id) {
  const model::StateTensor& t = tensor_of(c.layout, tensor);
  for (std::int64_t i = 0; i < natural_elems(t); ++i)
    set_elem(c.arenas[static_cast<std::size_t>(t.arena)], t, block_id, i,
             static_cast<std::uint64_t>(block_id * 100 + i));
}

inline void fill_blocks(model::LaunchCase& c, std::int32_t tensor,
                        const std::vector<std::int64_t>& block_ids) {
  for (std::int64_t b : block_ids)
    fill_block(c, tensor, b);
}

inline Elems block_elems(const std::vector<model::Arena>& arenas, const model::Layout& layout,
                         std::int32_t tensor, std::int64_t block_id) {
  const model::StateTensor& t = tensor_of(layout, tensor);
  Elems out;
  for (std::int64_t i = 0; i < natural_elems(t); ++i)
    out.push_back(get_elem(arenas[static_cast<std::size_t>(t.arena)], t, block_id, i));
  return out;
}

// The first byte offset where `before` and `after` differ outside the [begin, end) ranges,
// or -1.
inline std::int64_t
first_difference_outside(const model::Arena& before, const model::Arena& after,
                         const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
  EXPECT_EQ(before.size_bytes(), after.size_bytes());
  for (std::int64_t off = 0; off < before.size_bytes(); ++off) {
    bool inside = false;
    for (const auto& [begin, end] : ranges)
      inside = inside || (off >= begin && off < end);
    if (!inside && before.data()[off] != after.data()[off]) return off;
  }
  return -1;
}

// Every arena of `result` byte-equal to the case's, except inside `ranges` of arena `arena`.
inline void
expect_unchanged_except(const model::LaunchCase& c, const model::LaunchResult& result,
                        std::int32_t arena,
                        const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
  ASSERT_EQ(result.arenas.size(), c.arenas.size());
  for (std::size_t i = 0; i < c.arenas.size(); ++i) {
    if (static_cast<std::int32_t>(i) == arena)
      EXPECT_EQ(first_difference_outside(c.arenas[i], result.arenas[i], ranges), -1)
          << "arena " << i;
    else
      EXPECT_EQ(c.arenas[i].first_difference(result.arenas[i]), -1) << "arena " << i;
  }
}

// The natural byte range of one block of one tensor, [begin, end).
inline std::pair<std::int64_t, std::int64_t> block_range(const model::StateTensor& t,
                                                         std::int64_t block_id) {
  const std::int64_t begin = t.block_offset_bytes(block_id);
  return {begin, begin + t.natural_bytes};
}

} // namespace mc::oracle::test_util
