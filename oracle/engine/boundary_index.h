// The prefix cache's index of one block pool: boundary hash -> block id.
//
// BoundaryIndex is the interface the pool uses, over one of two implementations (structures.h):
// - BoundaryMap, the plain one: a std::unordered_map from hash to block.
// - BoundaryTable, the fast one. A pool registers at most one boundary per block, so the index
//   never holds more than num_blocks entries: an open-addressing table at most half full is
//   sized once and never rehashed. Linear probing from a Fibonacci hash of the boundary (a
//   multiply and a shift: the hashes are splitmix outputs already); erase shifts the rest of the
//   probe run back, so there are no tombstones and a lookup stops at the first empty slot. No
//   allocation after the constructor (no node per registration).
#pragma once

#include "model/errors.h"
#include "model/stamps.h"
#include "oracle/engine/structures.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace mc::oracle::engine {

class BoundaryMap {
public:
  explicit BoundaryMap(std::int32_t max_entries) : max_entries_(max_entries) {}

  std::optional<std::int32_t> find(model::TokenHash hash) const {
    const auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return std::nullopt;
    return it->second;
  }
  // False, changing nothing, when the hash is indexed already.
  bool insert(model::TokenHash hash, std::int32_t block) {
    MC_ASSERT(block >= 0);
    if (by_hash_.contains(hash)) return false;
    MC_ASSERT(size() < max_entries_);
    by_hash_.emplace(hash, block);
    return true;
  }
  // Asserts the hash is indexed.
  void erase(model::TokenHash hash) {
    const std::size_t erased = by_hash_.erase(hash);
    MC_ASSERT(erased == 1);
  }
  void clear() { by_hash_.clear(); }
  std::int32_t size() const { return static_cast<std::int32_t>(by_hash_.size()); }

private:
  std::unordered_map<model::TokenHash, std::int32_t> by_hash_;
  std::int32_t max_entries_ = 0;
};

class BoundaryTable {
public:
  explicit BoundaryTable(std::int32_t max_entries)
      : slots_(std::bit_ceil(std::max<std::size_t>(2 * static_cast<std::size_t>(max_entries), 16))),
        shift_(64 - std::countr_zero(slots_.size())), max_entries_(max_entries) {}

  std::optional<std::int32_t> find(model::TokenHash hash) const {
    for (std::size_t i = home(hash);; i = next(i)) {
      const Slot& s = slots_[i];
      if (s.block < 0) return std::nullopt;
      if (s.hash == hash) return s.block;
    }
  }

  // False, changing nothing, when the hash is indexed already.
  bool insert(model::TokenHash hash, std::int32_t block) {
    MC_ASSERT(block >= 0);
    std::size_t i = home(hash);
    for (; slots_[i].block >= 0; i = next(i))
      if (slots_[i].hash == hash) return false;
    MC_ASSERT(size_ < max_entries_);
    slots_[i] = {.hash = hash, .block = block};
    ++size_;
    return true;
  }

  // Asserts the hash is indexed.
  void erase(model::TokenHash hash) {
    std::size_t i = home(hash);
    while (slots_[i].hash != hash || slots_[i].block < 0) {
      MC_ASSERT(slots_[i].block >= 0);
      i = next(i);
    }
    // Backward shift: an entry later in the run moves into the hole unless its home lies
    // cyclically in (hole, entry], where the hole would cut it off from its home.
    for (std::size_t j = next(i);; j = next(j)) {
      if (slots_[j].block < 0) break;
      const std::size_t k = home(slots_[j].hash);
      const bool reachable_without_hole = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (reachable_without_hole) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].block = -1;
    --size_;
  }

  void clear() {
    for (Slot& s : slots_)
      s.block = -1;
    size_ = 0;
  }

  std::int32_t size() const { return size_; }

private:
  struct Slot {
    model::TokenHash hash = 0;
    std::int32_t block = -1; // -1: empty
  };
  std::size_t home(model::TokenHash hash) const {
    return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  std::size_t next(std::size_t i) const { return (i + 1) & (slots_.size() - 1); }

  std::vector<Slot> slots_;
  int shift_ = 0;
  std::int32_t max_entries_ = 0;
  std::int32_t size_ = 0;
};

class BoundaryIndex {
public:
  BoundaryIndex(std::int32_t max_entries, Structures structures)
      : plain_(structures == Structures::reference), map_(max_entries),
        table_(plain_ ? 0 : max_entries) {}

  std::optional<std::int32_t> find(model::TokenHash hash) const {
    return plain_ ? map_.find(hash) : table_.find(hash);
  }
  // False, changing nothing, when the hash is indexed already.
  bool insert(model::TokenHash hash, std::int32_t block) {
    return plain_ ? map_.insert(hash, block) : table_.insert(hash, block);
  }
  // Asserts the hash is indexed.
  void erase(model::TokenHash hash) { plain_ ? map_.erase(hash) : table_.erase(hash); }
  void clear() { plain_ ? map_.clear() : table_.clear(); }
  std::int32_t size() const { return plain_ ? map_.size() : table_.size(); }

private:
  bool plain_ = false;
  BoundaryMap map_;     // when plain_
  BoundaryTable table_; // otherwise (sized for no entries)
};

} // namespace mc::oracle::engine
