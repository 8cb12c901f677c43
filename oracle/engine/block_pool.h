// The block pool of one mamba group: free queue, reference counts, prefix cache.
//
// Modelled on vLLM's BlockPool (REFERENCE.md 3):
// - block 0 is the null block, never handed out, never freed;
// - take() pops from the head of the free queue; a block that still carries a prefix-cache
//   entry is evicted from the cache then (its state is about to be overwritten);
// - free() drops one reference; at zero the block goes to the tail of the queue (least
//   recently used first) but keeps its cache entry, so a later prefix hit can touch() it back;
// - async scheduling (REFERENCE.md 3): while a step is in flight, every block of its rows'
//   tables is marked (mark_in_flight); one of them freed meanwhile is held back, neither
//   takeable nor found by a prefix-cache lookup, until release_in_flight() when that step
//   completes. Nothing a step in flight can read or write is handed to another request.
// A cached block remembers its position p and the boundary it holds: the hash of the first
// (p+1)*B tokens and the last few of those tokens (the conv history), so its content can be
// checked against the ground truth at any time. With a hash unit below B (partial-hash hits,
// block_manager.h) a prompt's last hash boundary n, not a multiple of B, is cached too, from the
// block at p = n / B that holds the state after n tokens.
// The two ends of a copy-on-write copy are retained (retain()) until the step that runs the
// copy completes: a retention is a reference no table entry holds (vLLM keeps them as ref_cnt
// until Scheduler._free_cow_retained_blocks).
#pragma once

#include "model/errors.h"
#include "model/stamps.h"
#include "oracle/engine/boundary_index.h"
#include "oracle/engine/free_queue.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace mc::oracle::engine {

struct CachedBlock {
  model::TokenHash hash = 0;             // running hash of the first num_tokens tokens
  std::int32_t position = 0;             // block-table column it was registered at
  std::int32_t num_tokens = 0;           // (position+1)*B, or fewer for a partial tail
  std::vector<std::int32_t> tail_tokens; // the last tokens before the boundary, oldest first
};

class BlockPool {
public:
  // The free queue starts at block `first` and wraps around to block 1: a hybrid model's
  // groups share one pool in vLLM, so the tables of two groups never hold the same ids; the
  // block manager gives each group's pool a different first block to draw that.
  BlockPool(std::int32_t num_blocks, Structures structures, std::int32_t first = 1);

  std::int32_t num_blocks() const { return static_cast<std::int32_t>(ref_count_.size()); }
  std::int32_t num_free() const { return free_.size(); }
  bool queued(std::int32_t block_id) const { return free_.contains(block_id); } // takeable now
  std::int32_t ref_count(std::int32_t block_id) const { return ref_count_[index_of(block_id)]; }

  std::vector<std::int32_t> take(std::int32_t count);            // asserts count <= num_free()
  void take(std::int32_t count, std::vector<std::int32_t>& out); // appends them to `out`
  // Takes this very block (replay: a recorded scheduler chose it); false when it is held by
  // a request. Asserts it is not held back (held_back(): the caller reports that itself).
  bool take_block(std::int32_t block_id);
  void touch(std::int32_t block_id); // one more reference (a prefix hit)
  void free(std::int32_t block_id);
  // A copy's end kept until the copy ran: `retain` adds a reference, `keep_as_retained` turns
  // one the caller held into a retention; `release` drops a retention (free()).
  void retain(std::int32_t block_id);
  void keep_as_retained(std::int32_t block_id);
  void release(std::int32_t block_id);
  std::int32_t retained(std::int32_t block_id) const { return retained_[index_of(block_id)]; }
  // The destination of a copy whose step has not completed (retained as such): its cache entry,
  // moved there, holds its state only once the copy ran. `release_copy_target` logs the entry
  // as a registration again, so that the checker visits it then.
  void mark_copy_target(std::int32_t block_id);
  void release_copy_target(std::int32_t block_id);
  bool copy_target(std::int32_t block_id) const { return copy_target_[index_of(block_id)] != 0; }

  // Async: the step in flight can touch this block (a block of its rows' tables).
  // `touchable`: the step in flight can read or write it (BlockManager::mark_in_flight); a
  // block marked both ways stays touchable.
  void mark_in_flight(std::int32_t block_id, bool touchable = true);
  bool in_flight(std::int32_t block_id) const { return in_flight_[index_of(block_id)] != 0; }
  // Freed while in flight: referenced by nobody, not takeable yet.
  bool held_back(std::int32_t block_id) const {
    return in_flight(block_id) && ref_count(block_id) == 0;
  }
  // Held back, and the step in flight can still read or write it: handing it out is a hazard
  // (in_flight.h), where a held-back block it cannot touch was only kept by policy.
  bool held_back_touchable(std::int32_t block_id) const {
    return held_back(block_id) && in_flight_[static_cast<std::size_t>(block_id)] == kTouchable;
  }
  // Replay: a block held back by policy only stays reachable, by a hit (lookup, touch) or a
  // take, as vLLM's pool hands out a free at once; the model's own scheduler never asks.
  void reach_untouched_held_back() { reach_untouched_held_back_ = true; }
  bool reachable_held_back(std::int32_t block_id) const {
    return reach_untouched_held_back_ && held_back(block_id) && !held_back_touchable(block_id);
  }
  // The step in flight completed: no block is in flight, the held-back ones become free.
  void release_in_flight();
  // Frees held back since the pool was made (each free of an in-flight block counts once).
  std::int64_t frees_held_back() const { return frees_held_back_; }
  std::span<const std::int32_t> held_back_blocks() const { return held_; } // in the order freed
  // Blocks taken since the pool was made, and for each held-back block how many had been
  // taken when it was freed: the order of frees and takes while one step was planned.
  std::int64_t blocks_taken() const { return blocks_taken_; }
  std::span<const std::int64_t> held_back_after_takes() const { return held_after_takes_; }

  // `strict`: a block held back by policy only is out of reach too, whatever this pool's
  // reach (reach_untouched_held_back): the shortest a hit may be, where the default gives the
  // longest.
  std::optional<std::int32_t> lookup(model::TokenHash hash, bool strict = false) const;
  // Registers the block as holding the boundary `hash` at `position` (CachedBlock); asserts
  // it is not cached yet. Refused, changing nothing, when another block holds that boundary,
  // unless duplicates are allowed: then lookups find the first holder registered until it is
  // evicted, then the next (vLLM's BlockPool keeps several blocks per hash).
  // `num_tokens`: the tokens the state is after, (position+1)*B for a block boundary.
  void register_block(std::int32_t block_id, model::TokenHash hash, std::int32_t position,
                      std::span<const std::int32_t> tail_tokens, std::int32_t num_tokens);
  // The cache entry of `from` moves to `to` (not cached, just taken): the copy-on-write of a
  // partial tail whose block its request goes on writing. Counts as a registration of `to`.
  void move_entry(std::int32_t from, std::int32_t to);
  // The block's cache entry, or nullptr.
  const CachedBlock* cached(std::int32_t block_id) const {
    const std::size_t b = index_of(block_id);
    return is_cached_[b] != 0 ? &entries_[b] : nullptr;
  }
  // Another group of a shared pool took this block: its cache entry here is gone. False, and
  // nothing changed, when a request of this group holds it.
  bool taken_elsewhere(std::int32_t block_id);
  void allow_duplicate_boundaries() { duplicates_ = true; }
  // Drops every cache entry; asserts no block is referenced (reset_prefix_cache).
  void reset_cache();

  // Successful registrations are numbered from 0 in the order they happen. The blocks of
  // those numbered `since` and later, in that order (a block twice when it was registered
  // twice), or nullopt when the log no longer reaches back that far (it keeps the latest
  // few times num_blocks): the invariant checker visits only new registrations this way.
  std::optional<std::span<const std::int32_t>> registered_since(std::uint64_t since) const;
  std::uint64_t num_registrations() const { return log_base_ + log_.size(); }

private:
  // A block id of this pool as an index of the per-block vectors; `real_`: not the null block.
  std::size_t index_of(std::int32_t block_id) const {
    MC_ASSERT(block_id >= 0 && block_id < num_blocks());
    return static_cast<std::size_t>(block_id);
  }
  std::size_t real_index_of(std::int32_t block_id) const {
    MC_ASSERT(block_id != 0);
    return index_of(block_id);
  }
  void evict(std::int32_t block_id);
  void log_registration(std::int32_t block_id);

  std::vector<std::int32_t> ref_count_;
  std::vector<std::int32_t> retained_;    // of ref_count_, the retentions of copies
  std::vector<std::int32_t> copy_target_; // pending copies into the block
  FreeQueue free_;
  void unhold(std::int32_t block_id); // out of held_ (reached before release_in_flight)
  bool reach_untouched_held_back_ = false;
  static constexpr std::uint8_t kHeld = 1, kTouchable = 2;
  std::vector<std::uint8_t> in_flight_;        // by block id: 0, kHeld or kTouchable
  std::vector<std::int32_t> in_flight_list_;   // the marked blocks, to clear them
  std::vector<std::int32_t> held_;             // freed while in flight
  std::vector<std::int64_t> held_after_takes_; // blocks_taken_ when each was freed
  std::int64_t frees_held_back_ = 0;
  std::int64_t blocks_taken_ = 0;
  BoundaryIndex by_hash_;
  // Cache entries by block id, valid where is_cached_; an evicted entry keeps its memory for
  // the block's next registration.
  std::vector<CachedBlock> entries_;
  std::vector<std::uint8_t> is_cached_;
  // Duplicates allowed: the holders of a boundary after the one by_hash_ finds, oldest first.
  bool duplicates_ = false;
  std::unordered_map<model::TokenHash, std::vector<std::int32_t>> more_holders_;
  std::vector<std::int32_t> log_; // registrations numbered log_base_ and later
  std::uint64_t log_base_ = 0;
};

} // namespace mc::oracle::engine
