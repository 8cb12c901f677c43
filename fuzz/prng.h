// SplitMix64: the small deterministic PRNG behind arena contents and scattered block ids.
//
// Written out here rather than taken from <random> because std's distributions are
// implementation-defined: a spec must give the same bytes on every build, so that a
// counterexample replays anywhere.
#pragma once

#include <cstdint>

namespace mc::fuzz::detail {

struct SplitMix64 {
  std::uint64_t state = 0;

  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) (bound > 0); the modulo bias is irrelevant here.
  std::uint64_t below(std::uint64_t bound) { return next() % bound; }
};

// A seed for one (a, b, c) coordinate, independent of the order things are visited in.
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  SplitMix64 r{a ^ (b * 0xD1B54A32D192ED03ull) ^ (c * 0x8CB92BA72F3D8DD7ull)};
  r.next();
  return r.next();
}

} // namespace mc::fuzz::detail
