// The synthetic forward as a kernel body (model/FORWARD.md): program (op, tensor) writes one
// state tensor's block for one ForwardOp, with the stamps of model/stamps.h (host and device).
// - temporal: natural bytes of temporal_word(hash, tensor, word), little-endian;
// - conv: row r of the window holds position q = running - H + r: the stamp of the token at
//   q for 0 <= q < c + s, else 0; SD order (r * dim + ch), DS order (ch * L + r).
// A program whose op kind differs from the tensor's kind, or whose column or block id is
// outside the table or the arena, writes nothing (the oracle reports those as findings).
// `lane`/`lanes` split one program's elements over the threads of a CTA (1 on the host).
#pragma once

#include "gpu/engine/forward_types.h"
#include "model/hd.h"
#include "model/stamps.h"

#include <cstdint>

namespace mc::gpu::engine {

// Stores the low `bytes` bytes of `value` little-endian at `dst` (byte by byte: any alignment).
MC_HD_INLINE void store_le(unsigned char* dst, std::uint64_t value, std::int32_t bytes) {
  for (std::int32_t i = 0; i < bytes; ++i)
    dst[i] = static_cast<unsigned char>(value >> (8 * i));
}

MC_HD_INLINE unsigned char* forward_block(const ForwardParams& p, const ForwardOp& op,
                                          const ForwardTensor& t) {
  if (op.col < 0 || op.col >= p.row_width) return nullptr;
  const auto* table = reinterpret_cast<const std::int32_t*>(p.block_tables[t.group]);
  const std::int32_t block_id =
      table[static_cast<std::int64_t>(op.batch_row) * p.row_stride + op.col];
  if (block_id < 0 || block_id >= p.num_blocks) return nullptr;
  return reinterpret_cast<unsigned char*>(t.base_addr +
                                          static_cast<std::uint64_t>(block_id) *
                                              static_cast<std::uint64_t>(t.block_stride_bytes));
}

MC_HD_INLINE void forward_temporal(const ForwardOp& op, const ForwardTensor& t, std::int32_t tensor,
                                   unsigned char* block, std::int64_t lane, std::int64_t lanes) {
  const std::int64_t num_words = (t.natural_bytes + 7) / 8;
  for (std::int64_t w = lane; w < num_words; w += lanes) {
    const std::int64_t left = t.natural_bytes - 8 * w;
    store_le(block + 8 * w, model::temporal_word(op.hash, tensor, w),
             static_cast<std::int32_t>(left < 8 ? left : 8));
  }
}

MC_HD_INLINE void forward_conv(const ForwardParams& p, const ForwardOp& op, const ForwardTensor& t,
                               std::int32_t tensor, unsigned char* block, std::int64_t lane,
                               std::int64_t lanes) {
  const std::int64_t num_elems = static_cast<std::int64_t>(t.conv_width) * t.conv_dim;
  for (std::int64_t e = lane; e < num_elems; e += lanes) {
    const std::int64_t r = e / t.conv_dim;
    const std::int64_t ch = e % t.conv_dim;
    const std::int64_t q = op.running - t.history_rows + r;
    std::uint64_t value = 0;
    if (q >= 0 && q < op.end) {
      const std::int32_t token = p.tokens[op.token_offset + (q - op.token_pos0)];
      value = model::conv_stamp(token, q, tensor, ch, t.elem_size);
    }
    const std::int64_t index = t.conv_ds != 0 ? ch * t.conv_width + r : r * t.conv_dim + ch;
    store_le(block + index * t.elem_size, value, t.elem_size);
  }
}

MC_HD_INLINE void forward_program(const ForwardParams& p, std::int64_t program, std::int64_t lane,
                                  std::int64_t lanes) {
  const std::int64_t op_index = program / p.num_tensors;
  const auto tensor = static_cast<std::int32_t>(program % p.num_tensors);
  const ForwardOp& op = p.ops[op_index];
  const ForwardTensor& t = p.tensors[tensor];
  if (op.is_temporal != t.is_temporal) return;
  unsigned char* block = forward_block(p, op, t);
  if (block == nullptr) return;
  if (t.is_temporal != 0) {
    forward_temporal(op, t, tensor, block, lane, lanes);
  } else {
    forward_conv(p, op, t, tensor, block, lane, lanes);
  }
}

} // namespace mc::gpu::engine
