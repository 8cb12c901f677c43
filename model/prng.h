// splitmix64: the one small deterministic PRNG of the project, behind generated arenas and
// block ids (fuzz/), the engine simulation's workloads and scheduler draws (oracle/engine/), and
// token ids derived from small integers (scenarios/).
//
// Written out here rather than taken from <random> because std's distributions are
// implementation-defined: a seed must give the same cases, steps and bytes on every build, so
// that a counterexample replays anywhere. Its output function is model::mix64 (stamps.h).
#pragma once

#include "model/errors.h"
#include "model/stamps.h"

#include <cstdint>

namespace mc::model {

// splitmix64's increment (the golden ratio in 64 bits).
inline constexpr std::uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ULL;

// The first output of the stream whose state is `x`: a hash of one integer.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  return mix64(x + kSplitMixGamma);
}

class SplitMix64 {
public:
  // The stream whose state starts at `state` (fuzz/: seeds already mixed by the caller).
  constexpr explicit SplitMix64(std::uint64_t state) : state_(state) {}

  // The stream of a user's seed, mixed once first so that seeds 1, 2, 3 start far apart (the
  // engine simulation's seeding: its steps for a seed depend on it).
  static constexpr SplitMix64 from_seed(std::uint64_t seed) {
    return SplitMix64(mix64(seed ^ 0x5851F42D4C957F2DULL));
  }

  constexpr std::uint64_t next() {
    state_ += kSplitMixGamma;
    return mix64(state_);
  }
  // Uniform in [0, bound), bound > 0; the modulo bias is irrelevant here.
  constexpr std::uint64_t below(std::uint64_t bound) {
    MC_ASSERT(bound > 0);
    return next() % bound;
  }
  // Uniform in [lo, hi] (inclusive).
  constexpr std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    MC_ASSERT(lo <= hi);
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(next() % span);
  }
  constexpr std::int32_t uniform32(std::int32_t lo, std::int32_t hi) {
    return static_cast<std::int32_t>(uniform(lo, hi));
  }
  // True with probability `per_million` / 1e6.
  constexpr bool chance(std::int32_t per_million) {
    MC_ASSERT(per_million >= 0 && per_million <= 1'000'000);
    return static_cast<std::int32_t>(next() % 1'000'000) < per_million;
  }

private:
  std::uint64_t state_;
};

// A seed for one (a, b, c) coordinate, independent of the order things are visited in.
constexpr std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  SplitMix64 r(a ^ (b * 0xD1B54A32D192ED03ULL) ^ (c * 0x8CB92BA72F3D8DD7ULL));
  r.next();
  return r.next();
}

} // namespace mc::model
