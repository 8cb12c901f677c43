/* The copy of one state of one request: copy(t, row, src_col, dst_col, bias) of
 * model/LAUNCH_KINDS.md, one work unit (kUnitBytes) at a time.
 *
 * - conv SD: state[bt(src), bias:, :] -> state[bt(dst), :w - bias, :]: one flat range of
 *   max(w - bias, 0) token rows starting bias rows into the source block.
 * - conv DS: per dim row, state[bt(src), d, bias:] -> state[bt(dst), d, :w - bias]
 *   (gpu/kernels/ds_copy.cuh); with bias 0 and packed rows it is one flat range.
 * - temporal: state[bt(src + bias)] -> state[bt(dst)], the natural bytes (never the page
 *   stride, class D); the bias selects a column, not an offset.
 * Same-block shifts are memmove-exact (byte_copy.cuh, ds_copy.cuh). Block ids come resolved
 * per group from the decider (GroupBlocks); addresses are 64-bit and unsigned.
 * With kRecord, unit 0 of each (request, tensor) writes its DecisionRecord at slot
 * batch_row * num_tensors + tensor, also when 0 bytes move (bias >= w).
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/byte_copy.cuh"
#include "gpu/kernels/ds_copy.cuh"
#include "gpu/kernels/memory_ops.cuh"
#include "gpu/mutant.h"

#include <cstdint>

namespace mc::gpu {

// One copying row as the copy units see it.
struct RowCopy {
  std::int32_t batch_row = 0;
  std::int32_t slot = 0;
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  std::int32_t bias = 0;
};

// Where one state's copy reads and writes (for DS: block starts, rows handled apart).
struct CopyGeometry {
  std::uint64_t src_addr = 0;
  std::uint64_t dst_addr = 0;
  std::int64_t src_byte_offset = 0; // inside the source block (per DS row)
  std::int64_t bytes = 0;           // all DS rows together
  std::int32_t src_block_id = 0;
};

template <Mutant M>
MC_HD_INLINE CopyGeometry state_copy_geometry(const TensorDesc& t, const GroupBlocks& blocks,
                                              std::int32_t bias) {
  CopyGeometry g;
  g.dst_addr = block_addr(t.base_addr, blocks.dst, t.block_stride_bytes);
  std::int64_t kept_tokens = max64(static_cast<std::int64_t>(t.conv_width) - bias, 0);
  if constexpr (M == Mutant::conv_one_row_short) kept_tokens = max64(kept_tokens - 1, 0);
  if (t.kind == TensorKind::temporal) {
    g.src_block_id = blocks.temporal_src;
    if constexpr (M == Mutant::temporal_ignores_bias_column) g.src_block_id = blocks.conv_src;
    g.bytes = t.natural_bytes;
  } else if (t.kind == TensorKind::conv_sd) {
    g.src_block_id = blocks.conv_src;
    g.src_byte_offset = static_cast<std::int64_t>(bias) * t.token_row_bytes;
    if constexpr (M == Mutant::sd_bias_in_elements)
      g.src_byte_offset = static_cast<std::int64_t>(bias) * t.elem_size;
    g.bytes = kept_tokens * t.token_row_bytes;
  } else {
    g.src_block_id = blocks.conv_src;
    g.src_byte_offset = static_cast<std::int64_t>(bias) * t.elem_size;
    if constexpr (M == Mutant::ds_tail_ignores_bias) g.src_byte_offset = 0;
    g.bytes = static_cast<std::int64_t>(t.ds_row_count) * kept_tokens * t.elem_size;
  }
  if constexpr (M == Mutant::conv_source_at_bias_column) {
    if (t.kind != TensorKind::temporal) {
      g.src_block_id = blocks.temporal_src;
      g.src_byte_offset = 0;
    }
  }
  g.src_addr = block_addr(t.base_addr, g.src_block_id, t.block_stride_bytes);
  if (t.kind == TensorKind::conv_sd) g.src_addr += static_cast<std::uint64_t>(g.src_byte_offset);
  if constexpr (M == Mutant::block_offset_32bit) { // the product wraps at 2^32
    const auto narrow = [&](std::int32_t block_id) {
      return t.base_addr + static_cast<std::uint32_t>(static_cast<std::int64_t>(block_id) *
                                                      t.block_stride_bytes);
    };
    g.dst_addr = narrow(blocks.dst);
    g.src_addr = narrow(g.src_block_id);
    if (t.kind == TensorKind::conv_sd) g.src_addr += static_cast<std::uint64_t>(g.src_byte_offset);
  }
  return g;
}

// Mutants of the data mover (the clean path never calls these).
template <Mutant M, class Team>
MC_HD void copy_flat_mutant(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes,
                            std::int32_t chunk) {
  if constexpr (M == Mutant::overlap_copied_backwards) {
    if (ranges_overlap(dst, src, bytes)) {
      if (chunk != 0 || team.rank() != 0) return;
      for (std::int64_t i = bytes - 1; i >= 0; --i) // from the top: wrong for dst < src
        store_at<std::uint8_t>(dst + static_cast<std::uint64_t>(i),
                               load_at<std::uint8_t>(src + static_cast<std::uint64_t>(i)));
      return;
    }
  }
  if constexpr (M == Mutant::vector_tail_dropped) {
    if (((dst ^ src) & 15u) == 0) { // the vector path: stop at dst's last 16-byte boundary
      const std::uint64_t end = (dst + static_cast<std::uint64_t>(bytes)) & ~std::uint64_t{15};
      bytes = end > dst ? static_cast<std::int64_t>(end - dst) : 0;
    }
  }
  if constexpr (M == Mutant::vector_head_dropped) {
    if (((dst ^ src) & 15u) == 0) { // the vector path: start at dst's first 16-byte boundary
      const std::int64_t head =
          min64(bytes, static_cast<std::int64_t>((16u - (dst & 15u)) & 15u));
      dst += static_cast<std::uint64_t>(head);
      src += static_cast<std::uint64_t>(head);
      bytes -= head;
    }
  }
  copy_flat_chunk(team, dst, src, bytes, chunk, kUnitBytes);
}

// ds_shift_backwards: a same-block DS row shift done from the last element of each row.
template <class Team> MC_HD void copy_ds_rows_backwards(Team team, const DsRows& r) {
  if (team.rank() != 0) return;
  for (std::int64_t row = r.row_begin; row < r.row_end; ++row) {
    const std::uint64_t at = static_cast<std::uint64_t>(row * r.row_stride_bytes);
    for (std::int64_t j = r.tail_bytes - 1; j >= 0; --j)
      store_at<std::uint8_t>(
          r.dst_block + at + static_cast<std::uint64_t>(j),
          load_at<std::uint8_t>(r.src_block + at + static_cast<std::uint64_t>(r.bias_bytes + j)));
  }
}

MC_HD_INLINE void write_record(DecisionRecord* out, const RowCopy& row, std::int32_t tensor,
                               const GroupBlocks& blocks, const CopyGeometry& g) {
  DecisionRecord rec;
  rec.valid = 1;
  rec.batch_row = row.batch_row;
  rec.slot = row.slot;
  rec.tensor = tensor;
  rec.src_col = row.src_col;
  rec.dst_col = row.dst_col;
  rec.token_bias = row.bias;
  rec.src_block_id = g.src_block_id;
  rec.dst_block_id = blocks.dst;
  rec.src_byte_offset = g.src_byte_offset;
  rec.bytes = g.bytes;
  *out = rec;
}

// DS rows of unit `chunk`: the rows are split evenly over the tensor's units.
template <Mutant M, class Team>
MC_HD void copy_ds_unit(Team team, const TensorDesc& t, const CopyGeometry& g, std::int32_t bias,
                        std::int32_t chunk) {
  const std::int64_t row_bytes = static_cast<std::int64_t>(t.conv_width) * t.elem_size;
  if (bias == 0 && t.ds_row_stride_bytes == row_bytes) { // packed rows: one flat range
    copy_flat_chunk(team, g.dst_addr, g.src_addr, g.bytes, chunk, kUnitBytes);
    return;
  }
  const std::int64_t rows = t.ds_row_count;
  const std::int64_t rows_per_unit = (rows + t.num_units - 1) / t.num_units;
  DsRows r;
  r.dst_block = g.dst_addr;
  r.src_block = g.src_addr;
  r.row_stride_bytes = t.ds_row_stride_bytes;
  r.row_begin = min64(rows, chunk * rows_per_unit);
  r.row_end = min64(rows, r.row_begin + rows_per_unit);
  r.tail_bytes = max64(static_cast<std::int64_t>(t.conv_width) - bias, 0) * t.elem_size;
  r.bias_bytes = g.src_byte_offset;
  if constexpr (M == Mutant::ds_shift_backwards) {
    if (r.dst_block == r.src_block && r.bias_bytes > 0) return copy_ds_rows_backwards(team, r);
  }
  copy_ds_rows(team, r);
}

// Unit `chunk` of the copy of `tensor` for one copying row.
template <bool kRecord, Mutant M, class Team>
MC_HD void copy_state_unit(Team team, const TensorDesc& t, std::int32_t tensor, std::int32_t chunk,
                           const RowCopy& row, const GroupBlocks& blocks, DecisionRecord* records,
                           std::int32_t num_tensors) {
  const CopyGeometry g = state_copy_geometry<M>(t, blocks, row.bias);
  if constexpr (kRecord) {
    if (chunk == 0 && team.rank() == 0) {
      const std::int64_t slot = static_cast<std::int64_t>(row.batch_row) * num_tensors + tensor;
      write_record(records + slot, row, tensor, blocks, g);
    }
  }
  if constexpr (M == Mutant::same_block_copy_skipped) {
    if (g.src_block_id == blocks.dst) return;
  }
  if constexpr (M == Mutant::null_block_skipped) {
    if (g.src_block_id == 0) return;
  }
  if constexpr (M == Mutant::only_first_tensor_copied) {
    if (tensor != 0) return;
  }
  if constexpr (M == Mutant::only_group0_copied) {
    if (t.group != 0) return;
  }
  if (t.kind == TensorKind::conv_ds) {
    copy_ds_unit<M>(team, t, g, row.bias, chunk);
  } else if constexpr (M != Mutant::none) {
    copy_flat_mutant<M>(team, g.dst_addr, g.src_addr, g.bytes, chunk);
  } else {
    copy_flat_chunk(team, g.dst_addr, g.src_addr, g.bytes, chunk, kUnitBytes);
  }
}

} // namespace mc::gpu
