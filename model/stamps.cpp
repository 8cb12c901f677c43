#include "model/stamps.h"

#include "model/errors.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

namespace {

// temporal_value(seed, w) = v ^ (v >> 32) with v = (seed + K1 * w) * K2 = seed * K2 + w * K1 * K2
// (mod 2^64): v grows by a constant per word, so the host's loops below step it with an add and
// handle two words per SSE2 instruction (every x86-64 CPU). They run over every byte a
// full-depth step writes, reads back and compares (hundreds of megabytes on the host).
constexpr std::uint64_t kWordStep = 0x8CB92BA72F3D8DD7ULL * 0xD6E8FEB86659FD93ULL;
constexpr std::uint64_t first_product(std::uint64_t seed) {
  return seed * 0xD6E8FEB86659FD93ULL;
}
static_assert(temporal_value(12345, 7) == ((first_product(12345) + 7 * kWordStep) ^
                                           ((first_product(12345) + 7 * kWordStep) >> 32)));

#if defined(__SSE2__)
// v of words 0 and 1, in the low and high lanes.
__m128i first_two_products(std::uint64_t seed) {
  return _mm_set_epi64x(static_cast<long long>(first_product(seed) + kWordStep),
                        static_cast<long long>(first_product(seed)));
}
#endif

std::uint64_t load_word(const std::byte* at) {
  std::uint64_t w = 0;
  std::memcpy(&w, at, sizeof(w)); // little-endian host (x86-64, aarch64)
  return w;
}

template <typename Elem>
void write_conv_row_as(std::byte* at, const ConvRowPlace& place,
                       std::optional<std::uint64_t> row_seed, std::uint64_t carry) {
  for (std::int64_t ch = 0; ch < place.channels; ++ch, at += place.step) {
    const std::uint64_t stamp = row_seed ? conv_channel_value(*row_seed, ch, sizeof(Elem)) : 0;
    const auto v = static_cast<Elem>(stamp ^ carry);
    std::memcpy(at, &v, sizeof(v)); // little-endian host
  }
}

template <typename Elem>
std::uint64_t conv_row_difference_bits_as(const std::byte* at, const ConvRowPlace& place,
                                          std::optional<std::uint64_t> row_seed) {
  std::uint64_t diff = 0;
  for (std::int64_t ch = 0; ch < place.channels; ++ch, at += place.step) {
    Elem got = 0;
    std::memcpy(&got, at, sizeof(got));
    const std::uint64_t stamp = row_seed ? conv_channel_value(*row_seed, ch, sizeof(Elem)) : 0;
    diff |= static_cast<Elem>(got ^ static_cast<Elem>(stamp));
  }
  return diff;
}

} // namespace

void fill_temporal_seeded(std::span<std::byte> out, std::uint64_t seed) {
  const std::size_t num_words = out.size() / 8;
  std::size_t i = 0;
#if defined(__SSE2__)
  __m128i v = first_two_products(seed);
  const __m128i step = _mm_set1_epi64x(static_cast<long long>(2 * kWordStep));
  for (; i + 2 <= num_words; i += 2, v = _mm_add_epi64(v, step))
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + 8 * i),
                     _mm_xor_si128(v, _mm_srli_epi64(v, 32)));
#endif
  for (; i < num_words; ++i) {
    const std::uint64_t w = temporal_value(seed, static_cast<std::int64_t>(i));
    std::memcpy(out.data() + 8 * i, &w, 8);
  }
  const std::size_t tail = out.size() % 8;
  if (tail != 0) {
    const std::uint64_t w = temporal_value(seed, static_cast<std::int64_t>(num_words));
    std::memcpy(out.data() + 8 * num_words, &w, tail);
  }
}

std::uint64_t temporal_difference_bits(std::span<const std::byte> bytes, std::uint64_t seed) {
  const std::size_t num_words = bytes.size() / 8;
  std::size_t i = 0;
  std::uint64_t diff = 0;
#if defined(__SSE2__)
  __m128i v = first_two_products(seed);
  const __m128i step = _mm_set1_epi64x(static_cast<long long>(2 * kWordStep));
  __m128i any = _mm_setzero_si128();
  for (; i + 2 <= num_words; i += 2, v = _mm_add_epi64(v, step)) {
    const __m128i got = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes.data() + 8 * i));
    any = _mm_or_si128(any, _mm_xor_si128(got, _mm_xor_si128(v, _mm_srli_epi64(v, 32))));
  }
  std::uint64_t lanes[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), any);
  diff = lanes[0] | lanes[1];
#endif
  for (; i < num_words; ++i)
    diff |= load_word(bytes.data() + 8 * i) ^ temporal_value(seed, static_cast<std::int64_t>(i));
  const std::size_t tail = bytes.size() % 8;
  if (tail != 0) {
    std::uint64_t got = 0;
    std::memcpy(&got, bytes.data() + 8 * num_words, tail);
    const std::uint64_t mask = (std::uint64_t{1} << (8 * tail)) - 1;
    diff |= (got ^ temporal_value(seed, static_cast<std::int64_t>(num_words))) & mask;
  }
  return diff;
}

void write_conv_row(std::byte* at, const ConvRowPlace& place, std::optional<std::uint64_t> row_seed,
                    std::uint64_t carry) {
  MC_ASSERT(conv_row_loops_take(place.elem_size));
  if (place.elem_size == 2) return write_conv_row_as<std::uint16_t>(at, place, row_seed, carry);
  write_conv_row_as<std::uint32_t>(at, place, row_seed, carry);
}

std::uint64_t conv_row_difference_bits(const std::byte* at, const ConvRowPlace& place,
                                       std::optional<std::uint64_t> row_seed) {
  MC_ASSERT(conv_row_loops_take(place.elem_size));
  if (place.elem_size == 2) return conv_row_difference_bits_as<std::uint16_t>(at, place, row_seed);
  return conv_row_difference_bits_as<std::uint32_t>(at, place, row_seed);
}

} // namespace mc::model
