// Stamps: the deterministic world of the synthetic forward (DESIGN.md, "The synthetic forward
// and ground truth"). Both sides of the engine simulation use these functions; they are not
// the logic under test, only what a state *means*.
//
// - A token sequence has a running hash: h(0) = kEmptySequenceHash, h(p + 1) =
//   extend_hash(h(p), tokens[p]). Two requests with the same prefix share h, so their
//   states are equal and prefix caching is testable across requests.
// - The temporal state "after p tokens" of tensor t is fill_temporal(h(p), t): 8-byte words
//   temporal_value(seed(h, t), i), little-endian, cut to the tensor's natural bytes.
// - A conv window holds, per row (SD) or column (DS), a stamp of one (token, position) per
//   channel: conv_stamp(token, position, tensor, channel, elem_size) (a row seed mixed
//   once, then one multiply per channel), never 0 for a real token; position < 0 (before the
//   sequence) and "no token" are 0. Which position each row holds is the forward's contract
//   (model/FORWARD.md).
// Everything is integer mixing: splitmix64's finaliser once per state or conv row, then one
// multiply and one xor-shift per 8 bytes or conv element. The per-value functions are host and
// device (model/hd.h): the forward kernel calls these very definitions, so the GPU side cannot
// drift from the meaning the oracle checks.
#pragma once

#include "model/hd.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace mc::model {

using TokenHash = std::uint64_t;
inline constexpr TokenHash kEmptySequenceHash = 0x6A09E667F3BCC908ULL;

// splitmix64's output function: a bijection with good avalanche.
MC_HD_INLINE constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

// The running hash after one more token.
MC_HD_INLINE constexpr TokenHash extend_hash(TokenHash hash, std::int32_t token) {
  return mix64(hash + 0x9E3779B97F4A7C15ULL *
                          (static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)) + 1));
}

// Hash of a whole sequence (h(tokens.size())).
TokenHash sequence_hash(std::span<const std::int32_t> tokens);

// The temporal state after the sequence hashed `hash`, for tensor index `tensor` (index into
// Layout::tensors): writes out.size() bytes (the natural bytes of one block).
void fill_temporal(std::span<std::byte> out, TokenHash hash, std::int32_t tensor);
// The same from the state's seed (temporal_seed(hash, tensor)).
void fill_temporal_seeded(std::span<std::byte> out, std::uint64_t seed);
// The bits in which `bytes` differ from fill_temporal_seeded(seed) of their size, ORed over
// every word (0: they hold it): a whole state's check in one pass.
std::uint64_t temporal_difference_bits(std::span<const std::byte> bytes, std::uint64_t seed);

// A conv row on the host: `channels` elements of `elem_size` bytes, `step` bytes apart (SD: the
// element size; DS: the window's length times it).
struct ConvRowPlace {
  std::int64_t step = 0;
  std::int64_t channels = 0;
  std::int32_t elem_size = 0;
};
// Whether the row loops below take elements of this size (2 and 4 bytes, every preset's).
constexpr bool conv_row_loops_take(std::int32_t elem_size) {
  return elem_size == 2 || elem_size == 4;
}
// Writes the row at `at`: conv_channel_value(*row_seed, ch) of every channel, or zeros for a
// row without a token (no seed), each XOR `carry`, cut to the element size.
void write_conv_row(std::byte* at, const ConvRowPlace& place, std::optional<std::uint64_t> row_seed,
                    std::uint64_t carry);
// The bits in which the row at `at` differs from those values (carry 0), ORed over its channels.
std::uint64_t conv_row_difference_bits(const std::byte* at, const ConvRowPlace& place,
                                       std::optional<std::uint64_t> row_seed);

// The seed of the temporal state of tensor `tensor` after the sequence hashed `hash`: mixed
// once per state; each word then costs one multiply and one xor-shift (temporal_value). The
// words of one state are distinct (an add of an odd multiple of the index, an odd multiply and
// an xor-shift are bijections); another hash or tensor gives another seed.
MC_HD_INLINE constexpr std::uint64_t temporal_seed(TokenHash hash, std::int32_t tensor) {
  return mix64(hash ^ (0xD1B54A32D192ED03ULL * (static_cast<std::uint64_t>(tensor) + 1)));
}

MC_HD_INLINE constexpr std::uint64_t temporal_value(std::uint64_t seed, std::int64_t word) {
  std::uint64_t v =
      (seed + 0x8CB92BA72F3D8DD7ULL * static_cast<std::uint64_t>(word)) * 0xD6E8FEB86659FD93ULL;
  return v ^ (v >> 32);
}

// One 8-byte word of the same state (byte b of the state is byte b % 8 of word b / 8).
MC_HD_INLINE constexpr std::uint64_t temporal_word(TokenHash hash, std::int32_t tensor,
                                                   std::int64_t word) {
  return temporal_value(temporal_seed(hash, tensor), word);
}

// A conv element is cheap per channel because the engine writes and checks every element of
// every conv window several times a step: the row's (token, position, tensor) is mixed once
// (conv_row_seed), then each channel costs one multiply and one xor-shift (conv_channel_value).
// For a fixed row the 64-bit channel values are distinct (an xor with an odd multiple of the
// channel, an odd multiply and an xor-shift are bijections); the high half of the product
// is folded into the low bytes, so the 2- and 4-byte cuts depend on every input bit too.
MC_HD_INLINE constexpr std::uint64_t conv_row_seed(std::int32_t token, std::int64_t position,
                                                   std::int32_t tensor) {
  return mix64(static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)) *
                   0xA24BAED4963EE407ULL ^
               static_cast<std::uint64_t>(position) * 0x9FB21C651E98DF25ULL ^
               (static_cast<std::uint64_t>(tensor) << 40));
}

// The value of channel `channel` of a row whose seed is `row_seed`: the low elem_size bytes,
// never 0.
MC_HD_INLINE constexpr std::uint64_t
conv_channel_value(std::uint64_t row_seed, std::int64_t channel, std::int32_t elem_size) {
  std::uint64_t v = (row_seed ^ static_cast<std::uint64_t>(channel) * 0x9E3779B97F4A7C15ULL) *
                    0xD6E8FEB86659FD93ULL;
  v ^= v >> 32;
  if (elem_size < 8) v &= (std::uint64_t{1} << (8 * elem_size)) - 1;
  return v == 0 ? 1 : v;
}

// The value of one conv element: the low elem_size bytes; 0 when position < 0.
MC_HD_INLINE constexpr std::uint64_t conv_stamp(std::int32_t token, std::int64_t position,
                                                std::int32_t tensor, std::int64_t channel,
                                                std::int32_t elem_size) {
  if (position < 0) return 0;
  return conv_channel_value(conv_row_seed(token, position, tensor), channel, elem_size);
}

} // namespace mc::model
