/* DS conv copies: the tail of every dim row (LAUNCH_KINDS.md, "conv DS").
 *
 * For each dim row d of a (dim, state_len) block: state[src, d, bias:] -> state[dst, d,
 * :w - bias]. A row is a few elements (state_len x elem bytes), so the team walks the
 * output elements of a range of rows in row-major order, each thread one element per
 * access, in units of the widest power of two dividing the element size, both block
 * addresses and the row stride.
 *
 * Memmove (class D): when src and dst are the same block, a row's tail is read and written
 * by different threads. Elements are processed in increasing output order in steps (load,
 * team sync, store): output element (d, j) reads (d, j + bias), which no earlier step
 * writes (bias > 0), so the result is memmove's. Rows never share bytes, so row ranges
 * can be split across teams even for a same-block shift.
 */
#pragma once

#include "gpu/hd.h"
#include "gpu/kernels/memory_ops.cuh"

#include <cstdint>

namespace mc::gpu {

struct DsRows {
  std::uint64_t dst_block = 0;
  std::uint64_t src_block = 0;
  std::int64_t row_stride_bytes = 0;
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  std::int64_t tail_bytes = 0; // (w - bias) * elem, bytes written per row
  std::int64_t bias_bytes = 0; // bias * elem, where each row's source starts
};

// Quotient of i / d, in 32 bits when both fit (the common case: a unit is ~32 KiB).
MC_HD_INLINE std::int64_t quotient(std::int64_t i, std::int64_t d, bool narrow) {
  if (narrow)
    return static_cast<std::int64_t>(static_cast<std::uint32_t>(i) / static_cast<std::uint32_t>(d));
  return i / d;
}

template <class E, bool kOverlap, class Team> MC_HD void team_copy_ds_rows(Team team, DsRows r) {
  constexpr std::int64_t kE = sizeof(E);
  constexpr int kUnroll = 4;
  const std::int64_t per_row = r.tail_bytes / kE;
  const std::int64_t total = (r.row_end - r.row_begin) * per_row;
  const bool narrow = total < (std::int64_t{1} << 31);
  const std::int64_t step = static_cast<std::int64_t>(team.size()) * kUnroll;
  for (std::int64_t base = 0; base < total; base += step) {
    E regs[kUnroll] = {};
    std::uint64_t dst_addr[kUnroll] = {};
    bool live[kUnroll];
    MC_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = base + u * team.size() + team.rank();
      live[u] = i < total;
      if (live[u]) {
        const std::int64_t q = quotient(i, per_row, narrow);
        const std::int64_t j = i - q * per_row;
        const std::uint64_t row =
            static_cast<std::uint64_t>((r.row_begin + q) * r.row_stride_bytes);
        regs[u] = load_at<E>(r.src_block + row + static_cast<std::uint64_t>(r.bias_bytes + j * kE));
        dst_addr[u] = r.dst_block + row + static_cast<std::uint64_t>(j * kE);
      }
    }
    if constexpr (kOverlap) team.sync();
    MC_UNROLL
    for (int u = 0; u < kUnroll; ++u)
      if (live[u]) store_at<E>(dst_addr[u], regs[u]);
  }
}

template <bool kOverlap, class Team> MC_HD void team_copy_ds_rows_any(Team team, DsRows r) {
  if (r.tail_bytes <= 0 || r.row_end <= r.row_begin) return;
  const std::uint64_t bits =
      r.dst_block | r.src_block | static_cast<std::uint64_t>(r.row_stride_bytes) |
      static_cast<std::uint64_t>(r.tail_bytes) | static_cast<std::uint64_t>(r.bias_bytes);
  if ((bits & 7u) == 0) {
    team_copy_ds_rows<std::uint64_t, kOverlap>(team, r);
  } else if ((bits & 3u) == 0) {
    team_copy_ds_rows<std::uint32_t, kOverlap>(team, r);
  } else if ((bits & 1u) == 0) {
    team_copy_ds_rows<std::uint16_t, kOverlap>(team, r);
  } else {
    team_copy_ds_rows<std::uint8_t, kOverlap>(team, r);
  }
}

// Rows [row_begin, row_end) of one DS copy; same-block shifts take the memmove path.
template <class Team> MC_HD void copy_ds_rows(Team team, const DsRows& r) {
  if (r.dst_block == r.src_block && r.bias_bytes == 0) return; // a row onto itself
  if (r.dst_block == r.src_block) {
    team_copy_ds_rows_any<true>(team, r);
  } else {
    team_copy_ds_rows_any<false>(team, r);
  }
}

} // namespace mc::gpu
