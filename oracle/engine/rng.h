// A small deterministic PRNG for the engine simulation (splitmix64 stream).
//
// std::uniform_int_distribution is implementation-defined, so a run would not replay the
// same on another standard library; this one gives the same steps for a seed everywhere.
#pragma once

#include "model/errors.h"
#include "model/stamps.h"

#include <cstdint>

namespace mc::oracle::engine {

class Rng {
public:
  explicit Rng(std::uint64_t seed) : state_(model::mix64(seed ^ 0x5851F42D4C957F2DULL)) {}

  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return model::mix64(state_);
  }
  // Uniform in [lo, hi] (inclusive); the modulo bias is irrelevant for a simulation.
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    MC_ASSERT(lo <= hi);
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(next() % span);
  }
  std::int32_t uniform32(std::int32_t lo, std::int32_t hi) {
    return static_cast<std::int32_t>(uniform(lo, hi));
  }
  // True with probability `per_million` / 1e6.
  bool chance(std::int32_t per_million) {
    MC_ASSERT(per_million >= 0 && per_million <= 1'000'000);
    return static_cast<std::int32_t>(next() % 1'000'000) < per_million;
  }

private:
  std::uint64_t state_;
};

} // namespace mc::oracle::engine
