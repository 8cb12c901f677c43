// What ranges of arena bytes must hold, in a form the host and a device both turn into bytes.
//
// The engine oracle keeps what each block means (oracle/engine/state_store.h); a comparison
// with a backend whose bytes live elsewhere (a GPU's memory) hands it these descriptions, and
// the backend makes the expected bytes where its own are and returns only where they differ.
// The bytes follow model/stamps.h and the arena's poison (model/arena.h), the definitions the
// oracle's own bytes come from: a description decides nothing, it only restates a meaning.
#pragma once

#include "model/arena.h"
#include "model/hd.h"
#include "model/stamps.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mc::model {

// What one token row (SD) or column (DS) of a conv state holds.
struct ConvRowMeaning {
  enum class Kind : std::uint8_t {
    poison, // row `poison_row` of the block at arena offset `at`, as the arena's poison left it
    empty,  // no token: zeros
    stamp,  // the stamps of (token, position `at`)
  };
  Kind kind = Kind::poison;
  std::int32_t token = 0;
  std::int32_t poison_row = 0;
  std::int64_t at = 0;
  bool operator==(const ConvRowMeaning&) const = default;
};

// A conv row as a device reads it: the row's seed is mixed once, here.
struct ExpectedRow {
  ConvRowMeaning::Kind kind = ConvRowMeaning::Kind::poison;
  std::int32_t poison_row = 0;
  std::uint64_t value = 0; // stamp: conv_row_seed(token, position, tensor); poison: `at`
};

enum class ExpectedKind : std::uint8_t {
  poison,   // byte k is the poison of arena offset seed + k
  temporal, // byte k is byte k % 8 of temporal_value(seed, k / 8)
  conv,     // a conv state's natural bytes, row by row from `rows`
};

struct ExpectedRange {
  ArenaRange range;
  ExpectedKind kind = ExpectedKind::poison;
  std::uint64_t seed = 0; // poison: an arena offset; temporal: temporal_seed(hash, tensor)
  // conv: the state's geometry and its state_len rows, from ExpectedStates::rows[first_row]
  std::int32_t first_row = 0;
  std::int32_t state_len = 0;
  std::int32_t elem_size = 0;
  bool ds = false; // [dim x state_len] (else [state_len x dim])
  std::int64_t conv_dim = 0;
};

// Ranges in the order a comparison reports them (arena, then offset) and their conv rows.
struct ExpectedStates {
  std::vector<ExpectedRange> ranges;
  std::vector<ExpectedRow> rows;
};

// The element strides of a conv range's row step and channel step (SD [L x dim], DS [dim x L]).
struct ConvStrides {
  std::int64_t row = 0;
  std::int64_t channel = 0;
};
MC_HD_INLINE ConvStrides conv_strides(const ExpectedRange& r) {
  return {.row = r.ds ? 1 : r.conv_dim, .channel = r.ds ? r.state_len : 1};
}

// Byte `k` of `r`; `poison` is the arena's poison pattern (kPoisonPeriod bytes).
MC_HD_INLINE std::uint8_t expected_byte(const ExpectedRange& r, const ExpectedRow* rows,
                                        const std::uint8_t* poison, std::int64_t k) {
  if (r.kind == ExpectedKind::poison)
    return poison[(r.seed + static_cast<std::uint64_t>(k)) % kPoisonPeriod];
  if (r.kind == ExpectedKind::temporal)
    return static_cast<std::uint8_t>(temporal_value(r.seed, k / 8) >> (8 * (k % 8)));
  const std::int64_t elem = k / r.elem_size;
  const std::int64_t byte = k % r.elem_size;
  const std::int64_t row = r.ds ? elem % r.state_len : elem / r.conv_dim;
  const std::int64_t channel = r.ds ? elem / r.state_len : elem % r.conv_dim;
  const ExpectedRow& w = rows[r.first_row + row];
  if (w.kind == ConvRowMeaning::Kind::empty) return 0;
  if (w.kind == ConvRowMeaning::Kind::stamp)
    return static_cast<std::uint8_t>(conv_channel_value(w.value, channel, r.elem_size) >>
                                     (8 * byte));
  const ConvStrides s = conv_strides(r);
  const std::int64_t from = (w.poison_row * s.row + channel * s.channel) * r.elem_size;
  return poison[(w.value + static_cast<std::uint64_t>(from + byte)) % kPoisonPeriod];
}

// The bytes `r` says, into `out` (the range's size), on the host.
void make_expected(const ExpectedRange& r, const ExpectedRow* rows, std::span<std::byte> out);

// The first byte of `bytes` (the range's) that differs from what `r` says, or -1, on the host
// (what a device compare does where its bytes are): a temporal state and a conv state's stamp
// rows in one pass over their words and rows, poison against the pattern; only a state that
// differs, or a conv state with poison rows, is then walked to its first differing byte.
std::int64_t first_difference(const ExpectedRange& r, const ExpectedRow* rows,
                              std::span<const std::byte> bytes);
// The same for every range of `expected`, bytes[i] being range i's.
std::vector<std::int64_t> first_differences(const ExpectedStates& expected,
                                            std::span<const std::span<const std::byte>> bytes);

} // namespace mc::model
