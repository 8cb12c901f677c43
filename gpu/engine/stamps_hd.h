// Device-callable mirrors of the stamp functions of model/stamps.h (mix64, extend_hash,
// temporal_word, conv_stamp): model/stamps.h is constexpr host code, which nvcc does not
// call from a kernel without --expt-relaxed-constexpr. They are the same integer formulas,
// and tests/gpu/engine/stamps_hd_test.cpp proves they give the same bytes as model/stamps.
// Only what a state *means* lives here; no decision of the engine does.
#pragma once

#include "gpu/hd.h"

#include <cstdint>

namespace mc::gpu::engine {

MC_HD_INLINE std::uint64_t mix64_hd(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

MC_HD_INLINE std::uint64_t extend_hash_hd(std::uint64_t hash, std::int32_t token) {
  return mix64_hd(hash + 0x9E3779B97F4A7C15ULL *
                             (static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)) + 1));
}

MC_HD_INLINE std::uint64_t temporal_word_hd(std::uint64_t hash, std::int32_t tensor,
                                            std::int64_t word) {
  const std::uint64_t seed =
      mix64_hd(hash ^ (0xD1B54A32D192ED03ULL * (static_cast<std::uint64_t>(tensor) + 1)));
  const std::uint64_t v =
      (seed + 0x8CB92BA72F3D8DD7ULL * static_cast<std::uint64_t>(word)) * 0xD6E8FEB86659FD93ULL;
  return v ^ (v >> 32);
}

MC_HD_INLINE std::uint64_t conv_stamp_hd(std::int32_t token, std::int64_t position,
                                         std::int32_t tensor, std::int64_t channel,
                                         std::int32_t elem_size) {
  if (position < 0) return 0;
  const std::uint64_t row = mix64_hd(static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)) *
                                         0xA24BAED4963EE407ULL ^
                                     static_cast<std::uint64_t>(position) * 0x9FB21C651E98DF25ULL ^
                                     (static_cast<std::uint64_t>(tensor) << 40));
  std::uint64_t v =
      (row ^ static_cast<std::uint64_t>(channel) * 0x9E3779B97F4A7C15ULL) * 0xD6E8FEB86659FD93ULL;
  v ^= v >> 32;
  if (elem_size < 8) v &= (std::uint64_t{1} << (8 * elem_size)) - 1;
  return v == 0 ? 1 : v;
}

// Stores the low `bytes` bytes of `value` little-endian at `dst` (byte by byte: any alignment).
MC_HD_INLINE void store_le(unsigned char* dst, std::uint64_t value, std::int32_t bytes) {
  for (std::int32_t i = 0; i < bytes; ++i)
    dst[i] = static_cast<unsigned char>(value >> (8 * i));
}

} // namespace mc::gpu::engine
