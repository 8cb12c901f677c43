#include "oracle/engine/state_io.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace mc::oracle::engine {
namespace {

std::byte* block_bytes(const BlockRef& ref) {
  MC_ASSERT(ref.block_id >= 0 && ref.block_id < ref.num_blocks);
  const std::int64_t off = ref.tensor->block_offset_bytes(ref.block_id);
  MC_ASSERT(off + ref.tensor->natural_bytes <= ref.arena->size_bytes());
  return ref.arena->data() + off;
}

// Where element (row r, channel ch) of a conv block sits, whatever the orientation (SD
// [L x dim] or DS [dim x L], row-major): the block's first element and the element strides of
// a row step and of a channel step.
template <typename Elem> struct ConvCursor {
  Elem* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t channel_stride = 0;
  Elem& at(std::int64_t r, std::int64_t ch) const {
    return data[r * row_stride + ch * channel_stride];
  }
};

template <typename Elem> ConvCursor<Elem> conv_cursor(const BlockRef& ref) {
  const model::StateTensor& t = *ref.tensor;
  MC_ASSERT(t.kind() == model::StateKind::conv && t.elem_size == sizeof(Elem));
  std::byte* first = block_bytes(ref);
  MC_ASSERT(reinterpret_cast<std::uintptr_t>(first) % alignof(Elem) == 0);
  const bool sd = t.conv_layout == model::ConvLayout::SD;
  return {.data = reinterpret_cast<Elem*>(first),
          .row_stride = sd ? t.shape.conv_dim : 1,
          .channel_stride = sd ? 1 : t.shape.conv_state_len};
}

// The stamp of channel `ch` in a row of seed `row_seed` (model::conv_row_seed, once per row).
template <typename Elem> Elem stamp(std::uint64_t row_seed, std::int64_t ch) {
  return static_cast<Elem>(
      model::conv_channel_value(row_seed, ch, static_cast<std::int32_t>(sizeof(Elem))));
}

template <typename Elem>
std::optional<std::string> check_conv_typed(const BlockRef& ref, std::int64_t history,
                                            std::int64_t num_tokens, std::int64_t offset,
                                            const TokenWindow& tokens) {
  const model::StateTensor& t = *ref.tensor;
  const ConvCursor<Elem> block = conv_cursor<Elem>(ref);
  const std::int64_t L = t.shape.conv_state_len;
  const std::int64_t dim = t.shape.conv_dim;
  for (std::int64_t r = offset; r < std::min(offset + history, L); ++r) {
    const std::int64_t pos = num_tokens - history - offset + r;
    const std::optional<std::int32_t> token = pos >= 0 ? tokens.at(pos) : std::nullopt;
    // The whole row first, without an exit per element (the stamps pipeline), then, only for a
    // row that differs, the first wrong channel.
    const std::uint64_t seed = token ? model::conv_row_seed(*token, pos, ref.tensor_index) : 0;
    Elem diff = 0;
    if (token)
      for (std::int64_t ch = 0; ch < dim; ++ch)
        diff = static_cast<Elem>(diff | (block.at(r, ch) ^ stamp<Elem>(seed, ch)));
    else
      for (std::int64_t ch = 0; ch < dim; ++ch)
        diff = static_cast<Elem>(diff | block.at(r, ch));
    if (diff == 0) continue;
    for (std::int64_t ch = 0; ch < dim; ++ch) {
      const Elem want = token ? stamp<Elem>(seed, ch) : Elem{0};
      const Elem got = block.at(r, ch);
      if (got != want)
        return fmt::format("conv row {} channel {} holds {:#x}, not the stamp {:#x} of position "
                           "{} (state after {} tokens at offset {})",
                           r, ch, std::uint64_t{got}, std::uint64_t{want}, pos, num_tokens, offset);
    }
  }
  return std::nullopt;
}

template <typename Elem>
void write_conv_typed(const BlockRef& ref, std::int64_t history, std::int64_t running,
                      const TokenWindow& tokens) {
  const model::StateTensor& t = *ref.tensor;
  const ConvCursor<Elem> block = conv_cursor<Elem>(ref);
  const std::int64_t dim = t.shape.conv_dim;
  for (std::int64_t r = 0; r < t.shape.conv_state_len; ++r) {
    const std::int64_t pos = running - history + r;
    const std::optional<std::int32_t> token = pos >= 0 ? tokens.at(pos) : std::nullopt;
    if (token) {
      const std::uint64_t seed = model::conv_row_seed(*token, pos, ref.tensor_index);
      for (std::int64_t ch = 0; ch < dim; ++ch)
        block.at(r, ch) = stamp<Elem>(seed, ch);
    } else {
      for (std::int64_t ch = 0; ch < dim; ++ch)
        block.at(r, ch) = 0;
    }
  }
}

// f(Elem{}) with Elem the unsigned type of `elem_size` bytes (2, 4 or 8).
template <typename F> decltype(auto) with_elem_type(std::int64_t elem_size, F&& f) {
  switch (elem_size) {
  case 2:
    return f(std::uint16_t{});
  case 4:
    return f(std::uint32_t{});
  }
  MC_ASSERT(elem_size == 8);
  return f(std::uint64_t{});
}

// The first byte of the natural bytes at `got` that differs from the temporal state of `hash`,
// or -1. The words are computed as they are compared (model::temporal_value, the definition
// fill_temporal writes), so a 2.6 MB state is neither materialised nor read twice; runs of
// four words are compared at once (independent hashes overlap in the pipeline) and a run
// that differs is searched word by word.
std::int64_t first_temporal_difference(const std::byte* got, std::int64_t num_bytes,
                                       model::TokenHash hash, std::int32_t tensor) {
  constexpr std::int64_t kRun = 4;
  const std::int64_t num_words = num_bytes / 8;
  const std::uint64_t seed = model::temporal_seed(hash, tensor);
  std::int64_t word = 0;
  for (; word + kRun <= num_words; word += kRun) {
    std::uint64_t have[kRun];
    std::memcpy(have, got + 8 * word, sizeof(have)); // little-endian host
    std::uint64_t diff = 0;
    for (std::int64_t k = 0; k < kRun; ++k)
      diff |= have[k] ^ model::temporal_value(seed, word + k);
    if (diff != 0) break;
  }
  for (; 8 * word < num_bytes; ++word) {
    const std::uint64_t want = model::temporal_value(seed, word);
    const std::int64_t n = std::min<std::int64_t>(8, num_bytes - 8 * word);
    std::uint64_t have = 0;
    std::memcpy(&have, got + 8 * word, static_cast<std::size_t>(n));
    const std::uint64_t mask = n == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * n)) - 1;
    const std::uint64_t diff = (have ^ want) & mask;
    if (diff != 0) return 8 * word + std::countr_zero(diff) / 8;
  }
  return -1;
}

} // namespace

std::optional<std::string> check_temporal(const BlockRef& ref, model::TokenHash hash,
                                          std::span<const model::TokenHash> known_hashes) {
  const std::int64_t n = ref.tensor->natural_bytes;
  const std::byte* got = block_bytes(ref);
  const std::int64_t first = first_temporal_difference(got, n, hash, ref.tensor_index);
  if (first < 0) return std::nullopt;
  for (std::size_t p = 0; p < known_hashes.size(); ++p)
    if (first_temporal_difference(got, n, known_hashes[p], ref.tensor_index) < 0)
      return fmt::format("temporal state differs from byte {}: it holds the state after {} "
                         "tokens of this request",
                         first, p);
  return fmt::format("temporal state differs from byte {} (not the state after any count of "
                     "this request)",
                     first);
}

void write_temporal(const BlockRef& ref, model::TokenHash hash) {
  model::fill_temporal({block_bytes(ref), static_cast<std::size_t>(ref.tensor->natural_bytes)},
                       hash, ref.tensor_index);
}

std::optional<std::string> check_conv(const BlockRef& ref, std::int64_t history,
                                      std::int64_t num_tokens, std::int64_t offset,
                                      const TokenWindow& tokens) {
  return with_elem_type(ref.tensor->elem_size, [&](auto elem) {
    return check_conv_typed<decltype(elem)>(ref, history, num_tokens, offset, tokens);
  });
}

void write_conv(const BlockRef& ref, std::int64_t history, std::int64_t running,
                const TokenWindow& tokens) {
  with_elem_type(ref.tensor->elem_size, [&](auto elem) {
    write_conv_typed<decltype(elem)>(ref, history, running, tokens);
  });
}

} // namespace mc::oracle::engine
