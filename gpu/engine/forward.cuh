// The synthetic forward as a kernel body (model/FORWARD.md): program (op, tensor) writes one
// state tensor's block for one ForwardOp, with the stamps of model/stamps.h (host and device).
// - temporal: natural bytes of temporal_word(hash, tensor, word), little-endian;
// - conv: row r of the window holds position q = running - H + r: the stamp of the token at
//   q for 0 <= q < c + s, else 0; SD order (r * dim + ch), DS order (ch * L + r).
// A program whose op kind differs from the tensor's kind, or whose column or block id is
// outside the table or the arena, writes nothing (the oracle reports those as findings); nor
// does one on the null block of a CUDA-graph step, or an unused entry (batch row -1).
// Read programs (read, tensor) run first, in a launch of their own: each compares the block a
// row reads with the state after its c tokens (temporal: the whole state at the read's column;
// conv: rows [o, o + H) at its conv column, o its conv offset) and ORs the differing bits into
// read_diffs. A write whose op names that read mixes
// them into every value it stores, so a wrong read shows in the bytes the step writes.
// `lane`/`lanes` split one program's elements over the threads of a CTA (1 on the host).
#pragma once

#include "gpu/engine/forward_types.h"
#include "model/hd.h"
#include "model/stamps.h"

#include <cstdint>
#include <cstring>
#include <optional>

namespace mc::gpu::engine {

// Stores the low `bytes` bytes of `value` little-endian at `dst` (byte by byte: any alignment).
MC_HD_INLINE void store_le(unsigned char* dst, std::uint64_t value, std::int32_t bytes) {
  for (std::int32_t i = 0; i < bytes; ++i)
    dst[i] = static_cast<unsigned char>(value >> (8 * i));
}

// The low `bytes` bytes at `src`, little-endian.
MC_HD_INLINE std::uint64_t load_le(const unsigned char* src, std::int32_t bytes) {
  std::uint64_t value = 0;
  for (std::int32_t i = 0; i < bytes; ++i)
    value |= static_cast<std::uint64_t>(src[i]) << (8 * i);
  return value;
}

// A whole little-endian word: one access where `at` is 8-aligned (the natural bytes of a
// temporal state start on an element boundary, and the production layouts' on 8 bytes), byte by
// byte elsewhere. The host's access is a memcpy, which its compiler makes one move.
MC_HD_INLINE void store_word(unsigned char* dst, std::uint64_t value) {
#if defined(__CUDA_ARCH__)
  if (reinterpret_cast<std::uintptr_t>(dst) % 8 == 0) {
    *reinterpret_cast<std::uint64_t*>(dst) = value;
    return;
  }
  store_le(dst, value, 8);
#else
  std::memcpy(dst, &value, sizeof(value)); // little-endian host
#endif
}

MC_HD_INLINE std::uint64_t load_word(const unsigned char* src) {
#if defined(__CUDA_ARCH__)
  if (reinterpret_cast<std::uintptr_t>(src) % 8 == 0)
    return *reinterpret_cast<const std::uint64_t*>(src);
  return load_le(src, 8);
#else
  std::uint64_t value = 0;
  std::memcpy(&value, src, sizeof(value)); // little-endian host
  return value;
#endif
}

MC_HD_INLINE std::uint64_t low_bytes_mask(std::int32_t bytes) {
  return bytes >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
}

MC_HD_INLINE unsigned char* forward_block(const ForwardParams& p, std::int32_t batch_row,
                                          std::int32_t col, const ForwardTensor& t) {
  if (batch_row < 0 || col < 0 || col >= p.row_width) return nullptr;
  const auto* table = reinterpret_cast<const std::int32_t*>(p.block_tables[t.group]);
  const std::int32_t block_id = table[static_cast<std::int64_t>(batch_row) * p.row_stride + col];
  if (block_id < 0 || block_id >= p.num_blocks || block_id == p.null_block_id) return nullptr;
  return reinterpret_cast<unsigned char*>(t.base_addr +
                                          static_cast<std::uint64_t>(block_id) *
                                              static_cast<std::uint64_t>(t.block_stride_bytes));
}

// What a write carries of its row's read: 0 when the read agreed, else a value with its low
// bit set, so that every element it is mixed into changes.
MC_HD_INLINE std::uint64_t read_carry(const ForwardParams& p, const ForwardOp& op,
                                      std::int32_t tensor) {
  if (op.read < 0) return 0;
  const std::uint64_t diff =
      p.read_diffs[static_cast<std::int64_t>(op.read) * p.num_tensors + tensor];
  return diff == 0 ? 0 : model::mix64(diff) | 1;
}

MC_HD_INLINE void forward_temporal(const ForwardOp& op, const ForwardTensor& t, std::int32_t tensor,
                                   std::uint64_t carry, unsigned char* block, std::int64_t lane,
                                   std::int64_t lanes) {
  // temporal_word(hash, tensor, w), its seed mixed once.
  const std::uint64_t seed = model::temporal_seed(op.hash ^ carry, tensor);
#if !defined(__CUDA_ARCH__)
  if (lanes == 1) { // the host executor: the same words, two at a time
    model::fill_temporal_seeded(
        {reinterpret_cast<std::byte*>(block), static_cast<std::size_t>(t.natural_bytes)}, seed);
    return;
  }
#endif
  const std::int64_t num_words = (t.natural_bytes + 7) / 8;
  for (std::int64_t w = lane; w < num_words; w += lanes) {
    const std::int64_t left = t.natural_bytes - 8 * w;
    if (left >= 8)
      store_word(block + 8 * w, model::temporal_value(seed, w));
    else
      store_le(block + 8 * w, model::temporal_value(seed, w), static_cast<std::int32_t>(left));
  }
}

// Element e = row * dim + channel of a conv window, for e = first, first + step, ...: the row
// and channel follow without a division per element, and the row's stamp seed is mixed once
// per row a lane visits.
struct ConvCursor {
  MC_HD_INLINE ConvCursor(std::int64_t first, std::int64_t step, std::int64_t channels)
      : row(first / channels), channel(first % channels), row_step(step / channels),
        channel_step(step % channels), dim(channels) {}
  MC_HD_INLINE void next() {
    row += row_step;
    channel += channel_step;
    if (channel >= dim) {
      channel -= dim;
      ++row;
    }
  }
  // conv_stamp(token, q, tensor, channel, elem_size) for the cursor's row, which holds the
  // token at position q >= 0.
  MC_HD_INLINE std::uint64_t stamp(std::int32_t token, std::int64_t q, std::int32_t tensor,
                                   std::int32_t elem_size) {
    if (seeded_row != row) {
      seeded_row = row;
      row_seed = model::conv_row_seed(token, q, tensor);
    }
    return model::conv_channel_value(row_seed, channel, elem_size);
  }

  std::int64_t row;
  std::int64_t channel;
  std::int64_t row_step;
  std::int64_t channel_step;
  std::int64_t dim;
  std::int64_t seeded_row = -1; // the row row_seed belongs to
  std::uint64_t row_seed = 0;
};

// Byte offset of (row, channel) in a conv state's natural bytes (SD: r * dim + ch; DS: ch * L + r).
MC_HD_INLINE std::int64_t conv_byte_offset(const ForwardTensor& t, std::int64_t row,
                                           std::int64_t channel) {
  const std::int64_t index =
      t.conv_ds != 0 ? channel * t.conv_width + row : row * t.conv_dim + channel;
  return index * t.elem_size;
}

#if !defined(__CUDA_ARCH__)
// The host runs a program on one lane: a conv window row by row, a row's stamp seed mixed once
// and its channels in one loop (model/stamps.h; a production window has 10,240 channels).
// How far apart a row's channels lie (a row starts at conv_byte_offset(t, row, 0)), and a row's
// seed when it holds the token at position q.
inline model::ConvRowPlace conv_row_place(const ForwardTensor& t) {
  return {.step = t.elem_size * (t.conv_ds != 0 ? std::int64_t{t.conv_width} : 1),
          .channels = t.conv_dim,
          .elem_size = t.elem_size};
}
inline std::optional<std::uint64_t> host_row_seed(const ForwardParams& p, std::int32_t tensor,
                                                  std::int64_t q, bool has_token,
                                                  std::int64_t token_offset,
                                                  std::int64_t token_pos0) {
  if (!has_token) return std::nullopt;
  return model::conv_row_seed(p.tokens[token_offset + (q - token_pos0)], q, tensor);
}

// forward_conv on one lane, for the element sizes model::write_conv_row takes (false: the
// lanes' loop does it).
inline bool host_forward_conv(const ForwardParams& p, const ForwardOp& op, const ForwardTensor& t,
                              std::int32_t tensor, std::uint64_t carry, unsigned char* block) {
  if (!model::conv_row_loops_take(t.elem_size)) return false;
  for (std::int64_t row = 0; row < t.conv_width; ++row) {
    const std::int64_t q = op.running - t.history_rows + row;
    model::write_conv_row(
        reinterpret_cast<std::byte*>(block + conv_byte_offset(t, row, 0)), conv_row_place(t),
        host_row_seed(p, tensor, q, q >= 0 && q < op.end, op.token_offset, op.token_pos0), carry);
  }
  return true;
}

// The conv half of forward_read_diff on one lane, for the same element sizes (nullopt: the
// lanes' loop does it).
inline std::optional<std::uint64_t> host_conv_read_diff(const ForwardParams& p,
                                                        const ForwardRead& rd,
                                                        const ForwardTensor& t, std::int32_t tensor,
                                                        const unsigned char* block) {
  if (!model::conv_row_loops_take(t.elem_size)) return std::nullopt;
  std::uint64_t diff = 0;
  for (std::int64_t k = 0; k < t.history_rows; ++k) { // row k of the history
    const std::int64_t row = k + rd.conv_offset;
    if (row >= t.conv_width) break; // rows past the window: free
    const std::int64_t q = rd.num_computed - t.history_rows + k;
    diff |= model::conv_row_difference_bits(
        reinterpret_cast<const std::byte*>(block + conv_byte_offset(t, row, 0)), conv_row_place(t),
        host_row_seed(p, tensor, q, q >= 0, rd.token_offset, rd.token_pos0));
  }
  return diff;
}
#endif

MC_HD_INLINE void forward_conv(const ForwardParams& p, const ForwardOp& op, const ForwardTensor& t,
                               std::int32_t tensor, std::uint64_t carry, unsigned char* block,
                               std::int64_t lane, std::int64_t lanes) {
#if !defined(__CUDA_ARCH__)
  if (lanes == 1 && host_forward_conv(p, op, t, tensor, carry, block)) return;
#endif
  const std::int64_t num_elems = static_cast<std::int64_t>(t.conv_width) * t.conv_dim;
  if (num_elems <= 0) return;
  ConvCursor at(lane, lanes, t.conv_dim);
  for (std::int64_t e = lane; e < num_elems; e += lanes, at.next()) {
    const std::int64_t q = op.running - t.history_rows + at.row;
    std::uint64_t value = 0;
    if (q >= 0 && q < op.end)
      value = at.stamp(p.tokens[op.token_offset + (q - op.token_pos0)], q, tensor, t.elem_size);
    store_le(block + conv_byte_offset(t, at.row, at.channel), value ^ carry, t.elem_size);
  }
}

MC_HD_INLINE void forward_program(const ForwardParams& p, std::int64_t program, std::int64_t lane,
                                  std::int64_t lanes) {
  const std::int64_t op_index = program / p.num_tensors;
  const auto tensor = static_cast<std::int32_t>(program % p.num_tensors);
  const ForwardOp& op = p.ops[op_index];
  const ForwardTensor& t = p.tensors[tensor];
  if (op.is_temporal != t.is_temporal) return;
  unsigned char* block = forward_block(p, op.batch_row, op.col, t);
  if (block == nullptr) return;
  const std::uint64_t carry = read_carry(p, op, tensor);
  if (t.is_temporal != 0) {
    forward_temporal(op, t, tensor, carry, block, lane, lanes);
  } else {
    forward_conv(p, op, t, tensor, carry, block, lane, lanes);
  }
}

// Read program (read, tensor): the bits in which this lane's elements of the block read
// differ from the expected state (an unreadable column, the null block included, differs in
// bit 0; an unused entry reads nothing).
MC_HD_INLINE std::uint64_t forward_read_diff(const ForwardParams& p, std::int64_t program,
                                             std::int64_t lane, std::int64_t lanes) {
  const ForwardRead& rd = p.reads[program / p.num_tensors];
  if (rd.batch_row < 0) return 0; // an unused entry
  const auto tensor = static_cast<std::int32_t>(program % p.num_tensors);
  const ForwardTensor& t = p.tensors[tensor];
  const unsigned char* block =
      forward_block(p, rd.batch_row, t.is_temporal != 0 ? rd.col : rd.conv_col, t);
  if (block == nullptr) return lane == 0 ? 1 : 0;
  std::uint64_t diff = 0;
  if (t.is_temporal != 0) {
    const std::uint64_t seed = model::temporal_seed(rd.hash, tensor);
#if !defined(__CUDA_ARCH__)
    if (lanes == 1) // the host executor: the same check, two words at a time
      return model::temporal_difference_bits(
          {reinterpret_cast<const std::byte*>(block), static_cast<std::size_t>(t.natural_bytes)},
          seed);
#endif
    const std::int64_t num_words = (t.natural_bytes + 7) / 8;
    for (std::int64_t w = lane; w < num_words; w += lanes) {
      const std::int64_t left = t.natural_bytes - 8 * w;
      if (left >= 8) {
        diff |= load_word(block + 8 * w) ^ model::temporal_value(seed, w);
        continue;
      }
      const auto bytes = static_cast<std::int32_t>(left);
      diff |=
          (load_le(block + 8 * w, bytes) ^ model::temporal_value(seed, w)) & low_bytes_mask(bytes);
    }
    return diff;
  }
#if !defined(__CUDA_ARCH__)
  if (lanes == 1)
    if (const std::optional<std::uint64_t> d = host_conv_read_diff(p, rd, t, tensor, block))
      return *d;
#endif
  const std::int64_t num_elems = static_cast<std::int64_t>(t.history_rows) * t.conv_dim;
  if (num_elems <= 0) return diff;
  ConvCursor at(lane, lanes, t.conv_dim); // rows counted from the read's conv offset
  for (std::int64_t e = lane; e < num_elems; e += lanes, at.next()) {
    const std::int64_t r = at.row + rd.conv_offset;
    if (r >= t.conv_width) break; // rows past the window: free
    const std::int64_t q = rd.num_computed - t.history_rows + at.row;
    std::uint64_t expected = 0;
    if (q >= 0)
      expected = at.stamp(p.tokens[rd.token_offset + (q - rd.token_pos0)], q, tensor, t.elem_size);
    diff |= (load_le(block + conv_byte_offset(t, r, at.channel), t.elem_size) ^ expected) &
            low_bytes_mask(t.elem_size);
  }
  return diff;
}

} // namespace mc::gpu::engine
