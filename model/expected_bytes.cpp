// The host's form of a compare against expected bytes (expected_bytes.h): each kind of range
// compared in one pass over the bytes, without making the expected ones first.
#include "model/expected_bytes.h"

#include "model/errors.h"
#include "model/parallel.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

namespace mc::model {
namespace {

// The first of `n` bytes at `got` that differs from `want`, or -1.
std::int64_t first_mismatch(const std::byte* got, const std::uint8_t* want, std::int64_t n) {
  if (std::memcmp(got, want, static_cast<std::size_t>(n)) == 0) return -1;
  std::int64_t k = 0;
  while (static_cast<std::uint8_t>(got[k]) == want[k])
    ++k;
  return k;
}

std::int64_t first_poison_difference(std::uint64_t origin, std::span<const std::byte> bytes) {
  const std::uint8_t* pattern = poison_pattern_bytes();
  const auto size = static_cast<std::int64_t>(bytes.size());
  for (std::int64_t done = 0; done < size;) {
    const auto phase =
        static_cast<std::int64_t>((origin + static_cast<std::uint64_t>(done)) % kPoisonPeriod);
    const std::int64_t n = std::min(size - done, kPoisonPeriod - phase);
    if (const std::int64_t k = first_mismatch(bytes.data() + done, pattern + phase, n); k >= 0)
      return done + k;
    done += n;
  }
  return -1;
}

std::int64_t first_temporal_difference(std::uint64_t seed, std::span<const std::byte> bytes) {
  if (temporal_difference_bits(bytes, seed) == 0) return -1; // the common case, in one pass
  const auto size = static_cast<std::int64_t>(bytes.size());
  std::int64_t word = 0;
  for (; 8 * word + 8 <= size; ++word) {
    std::uint64_t got = 0;
    std::memcpy(&got, bytes.data() + 8 * word, sizeof(got)); // little-endian host
    if (const std::uint64_t diff = got ^ temporal_value(seed, word); diff != 0)
      return 8 * word + std::countr_zero(diff) / 8;
  }
  const std::uint64_t last = temporal_value(seed, word);
  for (std::int64_t k = 8 * word; k < size; ++k)
    if (static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(k)]) !=
        static_cast<std::uint8_t>(last >> (8 * (k % 8))))
      return k;
  return -1;
}

// Element `ch` of conv row `row` of `r`: where it lies in the state's bytes, and where its
// poison comes from (for a poison row) or its value (else).
struct ConvElement {
  std::int64_t at = 0;
  std::uint64_t poison_at = 0;
  std::uint64_t value = 0;
};
ConvElement conv_element(const ExpectedRange& r, const ExpectedRow& w, std::int64_t row,
                         std::int64_t ch) {
  const ConvStrides s = conv_strides(r);
  ConvElement e{.at = (row * s.row + ch * s.channel) * r.elem_size};
  if (w.kind == ConvRowMeaning::Kind::poison)
    e.poison_at =
        w.value + static_cast<std::uint64_t>((w.poison_row * s.row + ch * s.channel) * r.elem_size);
  else if (w.kind == ConvRowMeaning::Kind::stamp)
    e.value = conv_channel_value(w.value, ch, r.elem_size);
  return e;
}

// Whether a conv state of stamp and empty rows holds exactly its values: one pass without a
// branch per element, the common case of a comparison (a state with a poison row, or of an
// element size the row loops do not take, is left to the exact walk below).
bool conv_rows_hold(const ExpectedRange& r, const ExpectedRow* rows,
                    std::span<const std::byte> bytes) {
  if (!conv_row_loops_take(r.elem_size)) return false;
  const ConvStrides s = conv_strides(r);
  const ConvRowPlace place{
      .step = s.channel * r.elem_size, .channels = r.conv_dim, .elem_size = r.elem_size};
  std::uint64_t diff = 0;
  for (std::int64_t row = 0; row < r.state_len; ++row) {
    const ExpectedRow& w = rows[r.first_row + row];
    if (w.kind == ConvRowMeaning::Kind::poison) return false;
    diff |= conv_row_difference_bits(bytes.data() + row * s.row * r.elem_size, place,
                                     w.kind == ConvRowMeaning::Kind::stamp ? std::optional(w.value)
                                                                           : std::nullopt);
  }
  return diff == 0;
}

// A conv state element by element: a stamp or zero compared whole, poison byte by byte.
std::int64_t first_conv_difference(const ExpectedRange& r, const ExpectedRow* rows,
                                   std::span<const std::byte> bytes) {
  if (conv_rows_hold(r, rows, bytes)) return -1;
  std::int64_t first = -1;
  for (std::int64_t row = 0; row < r.state_len; ++row) {
    const ExpectedRow& w = rows[r.first_row + row];
    for (std::int64_t ch = 0; ch < r.conv_dim; ++ch) {
      const ConvElement e = conv_element(r, w, row, ch);
      if (first >= 0 && e.at >= first) continue; // an earlier byte already differs
      const std::span<const std::byte> got =
          bytes.subspan(static_cast<std::size_t>(e.at), static_cast<std::size_t>(r.elem_size));
      std::int64_t k = -1;
      if (w.kind == ConvRowMeaning::Kind::poison) {
        k = first_poison_difference(e.poison_at, got);
      } else {
        std::uint64_t have = 0;
        std::memcpy(&have, got.data(), got.size()); // little-endian host
        if (const std::uint64_t diff = have ^ e.value; diff != 0) k = std::countr_zero(diff) / 8;
      }
      if (k >= 0) first = e.at + k;
    }
  }
  return first;
}

} // namespace

void make_expected(const ExpectedRange& r, const ExpectedRow* rows, std::span<std::byte> out) {
  MC_ASSERT(static_cast<std::int64_t>(out.size()) == r.range.size_bytes);
  switch (r.kind) {
  case ExpectedKind::poison:
    return fill_poison(out, static_cast<std::int64_t>(r.seed));
  case ExpectedKind::temporal:
    return fill_temporal_seeded(out, r.seed);
  case ExpectedKind::conv:
    for (std::int64_t row = 0; row < r.state_len; ++row) {
      const ExpectedRow& w = rows[r.first_row + row];
      for (std::int64_t ch = 0; ch < r.conv_dim; ++ch) {
        const ConvElement e = conv_element(r, w, row, ch);
        const std::span<std::byte> to =
            out.subspan(static_cast<std::size_t>(e.at), static_cast<std::size_t>(r.elem_size));
        if (w.kind == ConvRowMeaning::Kind::poison)
          fill_poison(to, static_cast<std::int64_t>(e.poison_at));
        else
          std::memcpy(to.data(), &e.value, to.size()); // little-endian host
      }
    }
    return;
  }
  MC_ASSERT(false);
}

std::int64_t first_difference(const ExpectedRange& r, const ExpectedRow* rows,
                              std::span<const std::byte> bytes) {
  MC_ASSERT(static_cast<std::int64_t>(bytes.size()) == r.range.size_bytes);
  switch (r.kind) {
  case ExpectedKind::poison:
    return first_poison_difference(r.seed, bytes);
  case ExpectedKind::temporal:
    return first_temporal_difference(r.seed, bytes);
  case ExpectedKind::conv:
    return first_conv_difference(r, rows, bytes);
  }
  MC_ASSERT(false);
  return -1;
}

std::vector<std::int64_t> first_differences(const ExpectedStates& expected,
                                            std::span<const std::span<const std::byte>> bytes) {
  MC_ASSERT(bytes.size() == expected.ranges.size());
  std::vector<std::int64_t> first(expected.ranges.size(), -1);
  std::int64_t total = 0;
  for (const ExpectedRange& r : expected.ranges)
    total += r.range.size_bytes;
  // Ranges are independent: a large comparison takes them off one shared count on every thread.
  std::atomic<std::size_t> next{0};
  run_parts(total, [&](std::int64_t, std::int64_t) {
    for (std::size_t i = next++; i < expected.ranges.size(); i = next++)
      first[i] = first_difference(expected.ranges[i], expected.rows.data(), bytes[i]);
  });
  return first;
}

} // namespace mc::model
