// The flattened per-(group, layer, state) metadata the kernels see (REFERENCE.md 1).
//
// One entry per state tensor, in Layout::tensors order. Addresses are unsigned
// 64-bit: a device address can be >= 2^63 when seen as signed (class B).
// - conv SD: inner_size = elements per token row (dim), conv_width = state_len.
// - conv DS: inner_size = 1, conv_width = state_len, ds_row_count = dim rows,
//   ds_row_stride_bytes = bytes between dim rows.
// - temporal: inner_size = natural elements per block, conv_width = 0.
// ds_row_count == 0 keeps the single-region copy path.
#pragma once

#include "model/layout.h"

#include <cstdint>
#include <span>
#include <vector>

namespace mc::model {

struct StateMeta {
  std::uint64_t base_addr = 0;          // address of block 0 of this state
  std::int64_t block_stride_bytes = 0;
  std::int64_t inner_size = 0;          // elements (see above)
  std::int64_t ds_row_stride_bytes = 0;
  std::int32_t elem_size = 0;
  std::int32_t conv_width = 0;          // 0 for temporal states
  std::int32_t group_index = 0;
  std::int32_t ds_row_count = 0;
};

// `arena_base_addrs[i]` is the address of arena i (host or device).
std::vector<StateMeta> flatten_metadata(const Layout& layout,
                                        std::span<const std::uint64_t> arena_base_addrs);

} // namespace mc::model
