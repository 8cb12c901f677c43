/* Team-wide flat byte copies: the data mover under every state copy.
 *
 * copy `bytes` from `src` to `dst` with the widest access both addresses allow: when
 * (src ^ dst) % 16 == 0 the copy is a byte head up to 16-byte alignment of dst, 16-byte
 * vectors, and a byte tail; otherwise 8-, 4-, 2- or 1-byte units by the same rule (states
 * can sit at odd offsets, e.g. 2-byte elements at offset 6). Each thread keeps kUnroll
 * units in flight.
 *
 * Memmove (REFERENCE.md 2, class D #50729): the contract's copies have dst offset 0 and
 * src offset >= 0, so an overlapping copy is a left shift (dst < src). kOverlap = true makes
 * it exact for a whole team: each step loads its units into registers, the team syncs,
 * then stores. A step's stores land below every later step's loads (dst < src), and a
 * step's loads finish before any thread of the team stores. Head and tail bytes are placed
 * so the same argument holds. An overlapping copy must be run by ONE team; disjoint copies
 * can be split across teams at any kUnitBytes boundary (congruence mod 16 is kept).
 */
#pragma once

#include "gpu/hd.h"
#include "gpu/kernels/memory_ops.cuh"

#include <cstdint>

namespace mc::gpu {

inline constexpr int kCopyUnroll = 8; // 256 threads x 8 x 16 B = 32 KiB per step

// Bytes [0, n) of a copy done one byte per thread (n < 16: heads and tails only).
template <class Team>
MC_HD_INLINE void team_copy_few_bytes(Team team, std::uint64_t dst, std::uint64_t src,
                                      std::int64_t n) {
  for (std::int64_t i = team.rank(); i < n; i += team.size())
    store_at<std::uint8_t>(dst + static_cast<std::uint64_t>(i),
                           load_at<std::uint8_t>(src + static_cast<std::uint64_t>(i)));
}

// Units of type V; dst and src congruent modulo sizeof(V).
template <class V, bool kOverlap, class Team>
MC_HD void team_copy_units(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes) {
  constexpr std::int64_t kV = sizeof(V);
  const std::int64_t misalign = static_cast<std::int64_t>(dst & static_cast<std::uint64_t>(kV - 1));
  const std::int64_t head = min64(bytes, (kV - misalign) & (kV - 1));
  const std::int64_t num_units = (bytes - head) / kV;
  const std::int64_t body_end = head + num_units * kV;
  // Head first: its stores sit below every body load (dst < src, src - dst >= kV).
  team_copy_few_bytes(team, dst, src, head);
  const std::uint64_t dst_body = dst + static_cast<std::uint64_t>(head);
  const std::uint64_t src_body = src + static_cast<std::uint64_t>(head);
  const std::int64_t step_units = static_cast<std::int64_t>(team.size()) * kCopyUnroll;
  for (std::int64_t base = 0; base < num_units; base += step_units) {
#if defined(__CUDA_ARCH__)
    V regs[kCopyUnroll]; // only the loaded entries are stored
#else
    V regs[kCopyUnroll] = {}; // (g++ -O3 cannot see that, and warns)
#endif
    MC_UNROLL
    for (int u = 0; u < kCopyUnroll; ++u) {
      const std::int64_t i = base + u * team.size() + team.rank();
      if (i < num_units) regs[u] = load_at<V>(src_body + static_cast<std::uint64_t>(i * kV));
    }
    if constexpr (kOverlap) team.sync();
    MC_UNROLL
    for (int u = 0; u < kCopyUnroll; ++u) {
      const std::int64_t i = base + u * team.size() + team.rank();
      if (i < num_units) store_at<V>(dst_body + static_cast<std::uint64_t>(i * kV), regs[u]);
    }
  }
  // Tail last: after every body load of the team (its stores may cover them).
  if constexpr (kOverlap) team.sync();
  const std::uint64_t end = static_cast<std::uint64_t>(body_end);
  team_copy_few_bytes(team, dst + end, src + end, bytes - body_end);
}

// The widest unit both addresses allow. Requires dst <= src when kOverlap.
template <bool kOverlap, class Team>
MC_HD void team_copy_bytes(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes) {
  if (bytes <= 0 || dst == src) return; // memmove onto itself changes nothing
  const std::uint64_t diff = dst ^ src;
  if ((diff & 15u) == 0) {
    team_copy_units<Bytes16, kOverlap>(team, dst, src, bytes);
  } else if ((diff & 7u) == 0) {
    team_copy_units<std::uint64_t, kOverlap>(team, dst, src, bytes);
  } else if ((diff & 3u) == 0) {
    team_copy_units<std::uint32_t, kOverlap>(team, dst, src, bytes);
  } else if ((diff & 1u) == 0) {
    team_copy_units<std::uint16_t, kOverlap>(team, dst, src, bytes);
  } else {
    team_copy_units<std::uint8_t, kOverlap>(team, dst, src, bytes);
  }
}

// True when [src, src + bytes) and [dst, dst + bytes) share a byte and are not identical.
MC_HD_INLINE bool ranges_overlap(std::uint64_t dst, std::uint64_t src, std::int64_t bytes) {
  const std::uint64_t n = static_cast<std::uint64_t>(bytes);
  return dst != src && src < dst + n && dst < src + n;
}

// Chunk `chunk` (kUnitBytes each) of a flat copy. An overlapping copy is done whole, with
// memmove semantics, by chunk 0's team; the other chunks of it do nothing.
template <class Team>
MC_HD void copy_flat_chunk(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes,
                           std::int64_t chunk, std::int64_t unit_bytes) {
  if (bytes <= 0 || dst == src) return;
  if (ranges_overlap(dst, src, bytes)) {
    if (chunk == 0) team_copy_bytes<true>(team, dst, src, bytes);
    return;
  }
  const std::int64_t begin = chunk * unit_bytes;
  if (begin >= bytes) return;
  const std::int64_t n = min64(unit_bytes, bytes - begin);
  const std::uint64_t off = static_cast<std::uint64_t>(begin);
  team_copy_bytes<false>(team, dst + off, src + off, n);
}

} // namespace mc::gpu
