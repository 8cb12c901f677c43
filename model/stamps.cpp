#include "model/stamps.h"

#include <cstring>

namespace mc::model {

TokenHash sequence_hash(std::span<const std::int32_t> tokens) {
  TokenHash h = kEmptySequenceHash;
  for (const std::int32_t token : tokens)
    h = extend_hash(h, token);
  return h;
}

void fill_temporal(std::span<std::byte> out, TokenHash hash, std::int32_t tensor) {
  fill_temporal_seeded(out, temporal_seed(hash, tensor));
}

void fill_temporal_seeded(std::span<std::byte> out, std::uint64_t seed) {
  const std::size_t num_words = out.size() / 8;
  for (std::size_t i = 0; i < num_words; ++i) {
    const std::uint64_t w = temporal_value(seed, static_cast<std::int64_t>(i));
    std::memcpy(out.data() + 8 * i, &w, 8); // little-endian host (x86-64, aarch64)
  }
  const std::size_t tail = out.size() % 8;
  if (tail != 0) {
    const std::uint64_t w = temporal_value(seed, static_cast<std::int64_t>(num_words));
    std::memcpy(out.data() + 8 * num_words, &w, tail);
  }
}

} // namespace mc::model
