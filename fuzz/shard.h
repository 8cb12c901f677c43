// A shard of a campaign: the K-th of N disjoint parts. Cases are dealt by index, case i to shard
// i % N, so the N shards together run exactly the cases of the single campaign (each with its
// seed-derived identity: case i is drawn from seed + i), and every shard gets the same mix of
// sizes, which cycle with i. Dealt round-robin rather than cut into ranges, the shards of a
// campaign under a time budget together cover a prefix of it, as one process would.
#pragma once

#include "model/errors.h"

#include <cstdint>

namespace mc::fuzz {

struct Shard {
  std::int64_t index = 0; // K, 0 <= K < N
  std::int64_t count = 1; // N; 1: the whole campaign

  bool whole() const { return count == 1; }
  bool holds(std::int64_t case_index) const { return case_index % count == index; }
};

// The first case index of `shard` at or after `from` (a resumed campaign starts at `from`).
inline std::int64_t first_case_of(const Shard& shard, std::int64_t from) {
  MC_ASSERT(shard.count >= 1 && shard.index >= 0 && shard.index < shard.count);
  MC_ASSERT(from >= 0);
  const std::int64_t offset = ((shard.index - from % shard.count) + shard.count) % shard.count;
  return from + offset;
}

} // namespace mc::fuzz
