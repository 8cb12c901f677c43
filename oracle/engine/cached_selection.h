// Which cached blocks the invariant checker visits after a commit (invariants.h: every block
// registered for prefix reuse holds the ground truth of its boundary).
//
// Outside a sweep, the blocks whose entry (a boundary on a block) has not been checked yet; in a
// sweep, every cached block; never a block a copy not run yet is to fill (BlockPool::copy_target).
// By block id either way, so the first finding is the same whichever blocks are visited. Two
// implementations (structures.h):
// - plain: every block of the pool is looked at, and those checked with their entry's hash
//   already are dropped.
// - fast: only the blocks registered since the last selection are looked at (BlockPool's
//   numbered registrations). A block whose entry is older was cached, with that entry, at the
//   last selection, so it was either selected then and marked checked afterwards, or checked
//   with it before; the plain filter would drop it. Where the pool's log does not reach back
//   that far, every block is looked at, as in the plain one.
#pragma once

#include "oracle/engine/block_pool.h"
#include "oracle/engine/structures.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace mc::oracle::engine {

class CachedSelection {
public:
  using Entry = std::pair<std::int32_t, const CachedBlock*>; // block id, its cache entry

  explicit CachedSelection(Structures structures) : since_log_(structures == Structures::fast) {}

  // Selects the blocks to check in every pool (one pool per group).
  void select(std::span<const BlockPool> pools, bool sweep_all);
  // The blocks selected in `group`, by block id.
  std::span<const Entry> selected(std::size_t group) const {
    MC_ASSERT(group < selected_.size());
    return selected_[group];
  }
  std::size_t num_groups() const { return selected_.size(); }
  // The selected entries held: they count as checked (call it before the pools change).
  void mark_checked();

private:
  struct CheckedBlock {
    model::TokenHash hash = 0; // the boundary last found right in this block
    bool seen = false;
  };
  // Per group: the pool and its registration count at the last selection.
  struct Registrations {
    const BlockPool* pool = nullptr;
    std::uint64_t seen = 0;
  };

  bool since_log_ = true;                          // the fast implementation
  std::vector<std::vector<CheckedBlock>> checked_; // by group, by block
  std::vector<Registrations> registrations_;       // by group
  std::vector<std::vector<Entry>> selected_;       // by group
};

} // namespace mc::oracle::engine
