// Picks for generators written with rc::gen::exec: small helpers that shrink well.
//
// Each helper draws through `*gen` and so must be called inside rc::gen::exec. Every
// pick shrinks toward its first or smallest choice, which the generators order from
// simplest to most exotic, so a counterexample shrinks toward plain cases.
// rc::gen::weightedElement does not shrink at all, hence pick_weighted. rc::gen::inRange
// narrows its range with the size parameter; these picks draw over the whole range at
// every size (the generators scale their bounds with the size themselves), so that a
// kind or family is as likely at size 3 as at size 100.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <initializer_list>

namespace mc::fuzz::detail {

inline constexpr int kFullRangeSize = 100; // RapidCheck's nominal size: inRange's full range

// An integer in [lo, hi] (both inclusive), shrinking toward lo.
inline std::int32_t pick_int(std::int32_t lo, std::int32_t hi) {
  if (hi <= lo) return lo;
  return *rc::gen::resize(kFullRangeSize, rc::gen::inRange<std::int32_t>(lo, hi + 1));
}

inline std::int64_t pick_int64(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  return *rc::gen::resize(kFullRangeSize, rc::gen::inRange<std::int64_t>(lo, hi + 1));
}

// The index of a bucket drawn with the given weights (zero weights are never drawn),
// shrinking toward the first bucket with a positive weight.
inline int pick_weighted(std::initializer_list<int> weights) {
  int total = 0;
  for (const int w : weights)
    total += w > 0 ? w : 0;
  if (total <= 0) return 0;
  const int draw = pick_int(0, total - 1);
  int index = 0;
  int acc = 0;
  for (const int w : weights) {
    acc += w > 0 ? w : 0;
    if (draw < acc) return index;
    ++index;
  }
  return index - 1;
}

// True with `percent` percent probability; shrinks toward false.
inline bool pick_bool(int percent) {
  return pick_weighted({100 - percent, percent}) == 1;
}

// A seed that never shrinks (arena contents, scattered block ids).
inline std::uint64_t pick_seed() {
  return *rc::gen::noShrink(rc::gen::arbitrary<std::uint64_t>());
}

} // namespace mc::fuzz::detail
