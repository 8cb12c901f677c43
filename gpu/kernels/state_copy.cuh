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
 * The formulas a mutant can change (kept tokens, source block and offset, block address, how
 * the bytes move) are asked of the Policy (gpu/kernels/clean_policy.cuh).
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/byte_copy.cuh"
#include "gpu/kernels/clean_policy.cuh"
#include "gpu/kernels/ds_copy.cuh"
#include "gpu/kernels/memory_ops.cuh"

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

template <class Policy>
MC_HD_INLINE CopyGeometry state_copy_geometry(const TensorDesc& t, const GroupBlocks& blocks,
                                              std::int32_t bias) {
  CopyGeometry g;
  g.dst_addr = Policy::block_address(t.base_addr, blocks.dst, t.block_stride_bytes);
  const std::int64_t kept_tokens = Policy::conv_kept_tokens(t.conv_width, bias);
  if (t.kind == TensorKind::temporal) {
    g.src_block_id = Policy::temporal_source_block(blocks);
    g.bytes = t.natural_bytes;
  } else if (t.kind == TensorKind::conv_sd) {
    const ConvSource src = Policy::conv_source(blocks, Policy::sd_source_offset(t, bias));
    g.src_block_id = src.block_id;
    g.src_byte_offset = src.byte_offset;
    g.bytes = kept_tokens * t.token_row_bytes;
  } else {
    const ConvSource src = Policy::conv_source(blocks, Policy::ds_source_offset(t, bias));
    g.src_block_id = src.block_id;
    g.src_byte_offset = src.byte_offset;
    g.bytes = static_cast<std::int64_t>(t.ds_row_count) * kept_tokens * t.elem_size;
  }
  g.src_addr = Policy::block_address(t.base_addr, g.src_block_id, t.block_stride_bytes);
  if (t.kind == TensorKind::conv_sd) g.src_addr += static_cast<std::uint64_t>(g.src_byte_offset);
  return g;
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
template <class Policy, class Team>
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
  Policy::move_ds_rows(team, r);
}

// Unit `chunk` of the copy of `tensor` for one copying row.
template <bool kRecord, class Policy, class Team>
MC_HD void copy_state_unit(Team team, const TensorDesc& t, std::int32_t tensor, std::int32_t chunk,
                           const RowCopy& row, const GroupBlocks& blocks, DecisionRecord* records,
                           std::int32_t num_tensors) {
  const CopyGeometry g = state_copy_geometry<Policy>(t, blocks, row.bias);
  if constexpr (kRecord) {
    if (chunk == 0 && team.rank() == 0) {
      const std::int64_t slot = static_cast<std::int64_t>(row.batch_row) * num_tensors + tensor;
      write_record(records + slot, row, tensor, blocks, g);
    }
  }
  if (!Policy::copy_moves_bytes(t, tensor, g.src_block_id, blocks.dst)) return;
  if (t.kind == TensorKind::conv_ds) {
    copy_ds_unit<Policy>(team, t, g, row.bias, chunk);
  } else {
    Policy::move_flat(team, g.dst_addr, g.src_addr, g.bytes, chunk);
  }
}

} // namespace mc::gpu
