#include "oracle/engine/state_io.h"

#include "model/errors.h"
#include "oracle/state_view.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace mc::oracle::engine {
namespace {

// Element (row r, channel ch) of a conv block, whatever the orientation.
template <typename Elem>
Elem& conv_elem(ConvBlock<Elem>& block, model::ConvLayout layout, std::int64_t r, std::int64_t ch) {
  return layout == model::ConvLayout::SD ? block(r, ch) : block(ch, r);
}

template <typename Elem>
std::optional<std::string> check_conv_typed(const BlockRef& ref, std::int64_t history,
                                            std::int64_t num_tokens, std::int64_t offset,
                                            const TokenAt& token_at) {
  const model::StateTensor& t = *ref.tensor;
  StateTensorView<Elem> view(*ref.arena, t, ref.num_blocks);
  ConvBlock<Elem> block = view.conv(ref.block_id);
  const std::int64_t L = t.shape.conv_state_len;
  for (std::int64_t r = offset; r < std::min(offset + history, L); ++r) {
    const std::int64_t pos = num_tokens - history - offset + r;
    const std::optional<std::int32_t> token = pos >= 0 ? token_at(pos) : std::nullopt;
    for (std::int64_t ch = 0; ch < t.shape.conv_dim; ++ch) {
      const auto want = static_cast<Elem>(
          token ? model::conv_stamp(*token, pos, ref.tensor_index, ch, t.elem_size) : 0);
      const Elem got = conv_elem(block, t.conv_layout, r, ch);
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
                      const TokenAt& token_at) {
  const model::StateTensor& t = *ref.tensor;
  StateTensorView<Elem> view(*ref.arena, t, ref.num_blocks);
  ConvBlock<Elem> block = view.conv(ref.block_id);
  for (std::int64_t r = 0; r < t.shape.conv_state_len; ++r) {
    const std::int64_t pos = running - history + r;
    const std::optional<std::int32_t> token = pos >= 0 ? token_at(pos) : std::nullopt;
    for (std::int64_t ch = 0; ch < t.shape.conv_dim; ++ch)
      conv_elem(block, t.conv_layout, r, ch) = static_cast<Elem>(
          token ? model::conv_stamp(*token, pos, ref.tensor_index, ch, t.elem_size) : 0);
  }
}

std::byte* block_bytes(const BlockRef& ref) {
  MC_ASSERT(ref.block_id >= 0 && ref.block_id < ref.num_blocks);
  const std::int64_t off = ref.tensor->block_offset_bytes(ref.block_id);
  MC_ASSERT(off + ref.tensor->natural_bytes <= ref.arena->size_bytes());
  return ref.arena->data() + off;
}

std::vector<std::byte>& scratch(std::int64_t size) {
  thread_local std::vector<std::byte> buffer;
  buffer.resize(static_cast<std::size_t>(size));
  return buffer;
}

} // namespace

std::optional<std::string> check_temporal(const BlockRef& ref, model::TokenHash hash,
                                          std::span<const model::TokenHash> known_hashes) {
  const std::int64_t n = ref.tensor->natural_bytes;
  std::vector<std::byte>& want = scratch(n);
  model::fill_temporal(want, hash, ref.tensor_index);
  const std::byte* got = block_bytes(ref);
  if (std::memcmp(got, want.data(), static_cast<std::size_t>(n)) == 0) return std::nullopt;
  std::int64_t first = 0;
  while (got[first] == want[static_cast<std::size_t>(first)])
    ++first;
  for (std::size_t p = 0; p < known_hashes.size(); ++p) {
    model::fill_temporal(want, known_hashes[p], ref.tensor_index);
    if (std::memcmp(got, want.data(), static_cast<std::size_t>(n)) == 0)
      return fmt::format("temporal state differs from byte {}: it holds the state after {} "
                         "tokens of this request",
                         first, p);
  }
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
                                      const TokenAt& token_at) {
  switch (ref.tensor->elem_size) {
  case 2:
    return check_conv_typed<std::uint16_t>(ref, history, num_tokens, offset, token_at);
  case 4:
    return check_conv_typed<std::uint32_t>(ref, history, num_tokens, offset, token_at);
  case 8:
    return check_conv_typed<std::uint64_t>(ref, history, num_tokens, offset, token_at);
  }
  MC_ASSERT(false);
  return std::nullopt;
}

void write_conv(const BlockRef& ref, std::int64_t history, std::int64_t running,
                const TokenAt& token_at) {
  switch (ref.tensor->elem_size) {
  case 2:
    return write_conv_typed<std::uint16_t>(ref, history, running, token_at);
  case 4:
    return write_conv_typed<std::uint32_t>(ref, history, running, token_at);
  case 8:
    return write_conv_typed<std::uint64_t>(ref, history, running, token_at);
  }
  MC_ASSERT(false);
}

} // namespace mc::oracle::engine
