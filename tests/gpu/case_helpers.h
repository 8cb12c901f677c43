// Small builders for gpu/ tests: layouts from one group spec, cases with poisoned arenas and
// block tables, and byte-exact arena expectations.
#pragma once

#include "model/launch.h"
#include "model/layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace mc::gpu::test {

inline model::GroupSpec group_spec(model::Family family, model::FamilyParams params,
                                   std::int32_t layers, std::int32_t conv_elem,
                                   std::int32_t temporal_elem,
                                   model::PagePolicy policy = model::PagePolicy::shared,
                                   std::int64_t page_align = 1) {
  return model::GroupSpec{.name = "g",
                          .family = family,
                          .params = params,
                          .num_layers = layers,
                          .conv_elem_size = conv_elem,
                          .temporal_elem_size = temporal_elem,
                          .page_policy = policy,
                          .page_align_bytes = page_align};
}

inline model::Layout make_layout(std::vector<model::GroupSpec> groups, std::int64_t num_blocks,
                                 model::ConvLayout conv_layout = model::ConvLayout::SD,
                                 std::int32_t block_size = 4, std::int32_t num_spec = 2) {
  model::CacheConfig config{.mamba_block_size = block_size,
                            .attn_block_size = 2,
                            .num_spec_tokens = num_spec,
                            .num_spec_blocks = num_spec,
                            .conv_layout = conv_layout};
  return model::build_layout(
      config, model::LayoutSpec{.groups = std::move(groups), .num_blocks = num_blocks});
}

// The tests' small mamba2 group: conv 3 rows x 8 fp16 (48 bytes) and temporal 2x2x2 fp32
// (32 bytes) per layer, pages aligned to 64 bytes, 8 blocks.
inline model::Layout small_mamba2_layout(model::PagePolicy policy = model::PagePolicy::separate,
                                         std::int32_t layers = 1) {
  return make_layout({group_spec(model::Family::mamba2,
                                 {.intermediate_size = 4,
                                  .n_groups = 1,
                                  .num_heads = 2,
                                  .head_dim = 2,
                                  .state_size = 2,
                                  .conv_kernel = 2},
                                 layers, 2, 4, policy, 64)},
                     8);
}

// A case with poisoned arenas and block tables of `num_rows` rows (every entry a pad slot).
inline model::LaunchCase make_case(model::Layout layout, model::LaunchKind kind,
                                   std::int32_t num_reqs, std::int32_t row_width,
                                   std::int32_t row_stride) {
  model::LaunchCase c;
  c.kind = kind;
  c.num_reqs = num_reqs;
  c.num_slots = num_reqs;
  for (const model::ArenaSpec& a : layout.arenas) {
    c.arenas.emplace_back(a.size_bytes());
    c.arenas.back().poison();
  }
  for (std::int32_t g = 0; g < layout.num_groups(); ++g)
    c.block_tables.groups.push_back(model::BlockTable::make(num_reqs, row_width, row_stride));
  c.layout = std::move(layout);
  return c;
}

// Sets row `row` of every group's table to `blocks` (columns 0..).
inline void set_row(model::LaunchCase& c, std::int32_t row,
                    const std::vector<std::int32_t>& blocks) {
  for (model::BlockTable& t : c.block_tables.groups)
    for (std::size_t col = 0; col < blocks.size(); ++col)
      t.at(row, static_cast<std::int32_t>(col)) = blocks[col];
}

// memmove inside an expected arena, from the bytes as they were (`before`).
inline void expect_move(model::Arena& expected, const model::Arena& before, std::int64_t dst,
                        std::int64_t src, std::int64_t bytes) {
  ASSERT_LE(dst + bytes, expected.size_bytes());
  ASSERT_LE(src + bytes, before.size_bytes());
  std::memmove(expected.data() + dst, before.data() + src, static_cast<std::size_t>(bytes));
}

inline void expect_same_arena(const model::Arena& got, const model::Arena& expected) {
  EXPECT_EQ(got.first_difference(expected), -1) << "first differing byte offset";
}

} // namespace mc::gpu::test
