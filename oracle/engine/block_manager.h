// The mamba block manager: per request and group, the block table the scheduler keeps.
//
// Align mode follows REFERENCE.md 3 exactly:
// - num_required = cdiv(num_tokens, B) + nsb; the running state lives at num_required-1-nsb;
// - first allocation: 1 + nsb new blocks, nulls before them, or after a prefix hit the
//   nulls and the single hit block first;
// - growth: nulls up to the running position, the old spec blocks that fall before it move
//   to the end (their old positions become null), at most one new block;
// - the block of the previous running state is remembered and freed (its position nulled)
//   once its index < cdiv(num_computed, B) - 1, two steps later, when it is no copy source.
// "all" mode keeps every block: one block per B tokens, none freed while running, and nsb
// speculative columns after the last one (a decode's draft prefixes: model/FORWARD.md), which
// become the blocks of their positions as the table grows.
// Blocks are cached (registered for prefix reuse) only after the step that wrote them has
// committed, never in the step that produced them (class C).
// Partial-hash hits (a hash unit h below B, align mode; vLLM MambaManager at upstream
// 6a391a931a92, `_cache_partial_tail_block` and the copy-on-write in `allocate_new_blocks`):
// - a request whose computed tokens end on its prompt's last hash boundary n = num_prompt / h * h,
//   not a multiple of B, caches that state from the block at column n / B (the model only from a
//   row without drafts: a padded prompt tail's drafts are in that block's conv window);
// - a prefix hit may end on any multiple of h: a new request then holds the cached block at
//   column n / B, and its first allocation swaps it for a private copy (the tokens after n
//   overwrite that column in place), copying the shared block into it;
// - the producer's next allocation copies the same way, but keeps its own block (a running
//   table only grows) and moves the cache entry to the copy;
// - the copies run when the step they were planned in starts, before its kernels; both ends
//   stay retained until that step completes, and a hit on a copy not run yet waits a step.
#pragma once

#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/block_pool.h"
#include "oracle/engine/request_records.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mc::oracle::engine {

struct GroupRow {
  std::vector<std::int32_t> block_ids; // the scheduler's table (nulled where freed or moved)
  std::int32_t last_state_idx = -1;    // the previous running block, freed once stale
  // Async scheduling: earlier previous running blocks that a growth passed before they were
  // stale (stale goes by the tokens committed, which lag the planned ones by the step in
  // flight); freed like last_state_idx once stale. Empty with synchronous scheduling.
  std::vector<std::int32_t> older_state_idx;
  // Every position before this one is null or holds a cached block, and stays so while the
  // request holds its table (positions are only ever nulled or appended; a held block is
  // never evicted): cache_blocks starts its walk here (the plain structures walk from 0).
  std::int32_t settled_positions = 0;
};

struct RequestBlocks {
  std::vector<GroupRow> groups;
  bool allocated = false; // has had its first allocation of new blocks
  // A partial-hash hit taken, or a partial tail registered, by this request: the column whose
  // block its next allocation copies on write, in every group (-1: none).
  std::int32_t partial_col = -1;
};

// Why a table that hands out block `block_id` of `group`, which `ref_count` references hold
// already, is one no block manager gives (replay's adoption and an edited step's check).
std::string held_block_message(std::size_t group, std::int32_t block_id, std::int32_t ref_count);

class BlockManager {
public:
  // `hash_unit`: the tokens a prefix hash covers (0: B, hits on block boundaries only); below
  // B, a divisor of it (align mode), hits and partial tails end on its multiples.
  BlockManager(const model::CacheConfig& config, std::int32_t num_groups, std::int32_t num_blocks,
               Structures structures, std::int32_t hash_unit = 0);

  std::int32_t hash_unit() const { return hash_unit_; }
  // The rightmost index i < positions_max whose boundary hash is cached in every group, by a
  // block no copy planned now writes (a hit on it waits: -2), or -1.
  std::int32_t find_cache_hit(std::span<const model::TokenHash> boundary_hashes,
                              std::int32_t positions_max) const;
  // A new (or resumed) request starts with nulls then the hit block of each group, at the
  // column of the state after `hit_tokens` tokens (a partial hit when not a multiple of B).
  void start_with_hit(const std::string& req_id, std::int32_t hit_tokens,
                      model::TokenHash boundary_hash);

  // New blocks the next allocate(num_tokens) takes from each group (the same for all).
  std::int32_t num_new_blocks(const std::string& req_id, std::int32_t num_tokens) const;
  bool can_allocate(const std::string& req_id, std::int32_t num_tokens) const;
  // Grows the tables to cover num_tokens; returns the appended tail of every group.
  model::GroupBlockIds allocate(const std::string& req_id, std::int32_t num_tokens);
  // Frees the stale previous running block (align mode).
  void remove_skipped(const std::string& req_id, std::int32_t num_computed);
  // The same three for a request that holds tables already (`held`: find(req_id), which stays
  // valid until that request is freed): the scheduler looks a running request up once a step.
  // `key`: the request's dense key, a hint (request_records.h).
  RequestBlocks* find_held(const std::string& req_id, std::int32_t key = -1) {
    return requests_.find(req_id, key);
  }
  bool can_allocate(const RequestBlocks& held, std::int32_t num_tokens) const;
  // Async: whether it could once the step in flight completes (its held-back frees counted).
  bool can_allocate_after_release(const RequestBlocks& held, std::int32_t num_tokens) const;
  void allocate(RequestBlocks& held, std::int32_t num_tokens, model::GroupBlockIds& tails);
  void remove_skipped(RequestBlocks& held, std::int32_t num_computed);
  void free_request(const std::string& req_id);
  // Registers every real block at a position p with (p+1)*B <= num_computed.
  // With a hash unit below B, `num_prompt` > 0: also the partial tail, when num_computed is the
  // prompt's last hash boundary (0: none, as when the request's next row is planned already
  // and overwrites that block before a copy could run).
  void cache_blocks(const std::string& req_id, std::int32_t num_computed,
                    std::span<const model::TokenHash> prefix_hashes,
                    std::span<const std::int32_t> tokens, std::int32_t tail_len,
                    std::int32_t num_prompt = 0);
  void cache_blocks(RequestBlocks& held, std::int32_t num_computed,
                    std::span<const model::TokenHash> prefix_hashes,
                    std::span<const std::int32_t> tokens, std::int32_t tail_len,
                    std::int32_t num_prompt = 0);
  // The copies the allocations since the last call planned, for step `step`, whose ends stay
  // retained until release_copies(step) (its completion).
  std::vector<model::BlockCopy> take_copies(std::int64_t step);
  void release_copies(std::int64_t step);
  // A copy planned and not taken yet writes `block` of `group`.
  bool copy_pending(std::size_t group, std::int32_t block) const;

  // Replay (oracle/engine/replay.h): tables chosen by another scheduler, applied with the rules
  // above. A message when the ids cannot come from this block manager (a held block handed
  // out again, a prefix hit on the null block); the tables are then left half applied.
  std::optional<std::string> adopt_first(const std::string& req_id,
                                         const model::GroupBlockIds& table,
                                         std::int32_t num_computed);
  std::optional<std::string> adopt_growth(const std::string& req_id,
                                          const model::GroupBlockIds& appended);
  // A block copy of the trace's step `step`: `to_hit`, the private copy of a partial-hash hit
  // (the admitted request's table holds `copy.dst` at its hit column, which adopt_first then
  // adopts as the hit); else the copy of a producer's own partial tail, whose cache entry moves
  // from `copy.src` to `copy.dst`. Both ends stay retained until release_copies(step).
  std::optional<std::string> adopt_copy(const model::BlockCopy& copy, bool to_hit,
                                        std::int64_t step);
  // All mode: the blocks a recorded manager no longer holds (`held`: its whole tables, null
  // where it freed) are freed here too. vLLM's MambaManager retires the blocks of an all-mode
  // table below the state the next step reads, as in align mode (remove_skipped_blocks at
  // 6a391a931a92), where the model keeps every block while the request runs; such a block
  // stays cached and findable. Whether the request still needed it, the reads judge.
  void adopt_frees(const std::string& req_id, const model::GroupBlockIds& held);

  const RequestBlocks* find(const std::string& req_id, std::int32_t key = -1) const {
    return requests_.find(req_id, key);
  }
  const BlockPool& pool(std::int32_t group) const {
    return pools_[static_cast<std::size_t>(group)];
  }
  std::span<const BlockPool> pools() const { return pools_; }
  void allow_duplicate_boundaries() {
    duplicates_ = true;
    for (BlockPool& p : pools_)
      p.allow_duplicate_boundaries();
  }
  void reach_untouched_held_back() { // BlockPool::reach_untouched_held_back, every group
    for (BlockPool& p : pools_)
      p.reach_untouched_held_back();
  }
  // Replay of a shared pool: another group's take evicts this group's entry (replay.h).
  BlockPool& mutable_pool(std::int32_t group) { return pools_[static_cast<std::size_t>(group)]; }
  std::int32_t num_groups() const { return static_cast<std::int32_t>(pools_.size()); }
  // Async scheduling (block_pool.h): every block of `held`'s tables is held back until the step
  // in flight completes (release_in_flight()); of those, the step can touch the ones from the
  // column its row reads on, the column of its last computed token (`row_start` tokens were
  // computed before it), and writes from there on. Those below are held by policy only.
  void mark_in_flight(const RequestBlocks& held, std::int32_t row_start);
  void release_in_flight();
  std::int64_t frees_held_back() const; // over every group
  // State blocks retired with a null column between them and the column the retirement starts
  // below: where a walk down from there that stops at the first null gives up (vLLM #55450).
  std::int64_t retired_across_null() const { return retired_across_null_; }
  void reset_cache(); // all requests must have been freed
  // Accounting: every block of every pool is in exactly one place: held by as many table
  // entries as its reference count says, or free (in the queue, cached or not), or held back
  // for the step in flight. What is wrong, in one line, or nullopt.
  std::optional<std::string> check_accounting() const;

private:
  std::int32_t num_required(std::int32_t num_tokens) const;
  std::int32_t num_new_blocks(const RequestBlocks* found, std::int32_t num_tokens) const;
  // allocate() of a request that had no tables (`first`) or of one that has, into `tails`
  // (whose vectors keep their capacity: the scheduler reuses them step after step).
  void grow(RequestBlocks& req, bool first, std::int32_t num_tokens, model::GroupBlockIds& tails);
  // The copy on write of `req`'s partial column, in every group (class comment).
  void copy_partial(RequestBlocks& req);
  // Both ends of `copy` (its destination just taken) retained until release_copies(step) (-1:
  // the step being planned, take_copies): a producer's source gains a reference and its cache
  // entry moves to the destination; a hit's source keeps the reference the hit took.
  void retain_copy_ends(const model::BlockCopy& copy, bool producer, std::int64_t step);
  void register_partial(RequestBlocks& held, std::int32_t num_tokens,
                        std::span<const model::TokenHash> prefix_hashes,
                        std::span<const std::int32_t> tokens, std::int32_t tail_len);
  // The row's previous running block is now `idx`; one not freed yet is kept to be freed.
  static void remember_state(GroupRow& row, std::int32_t idx);
  // Appends the new tail of the row to `tail`.
  void grow_align(GroupRow& row, bool allocated, std::int32_t required, BlockPool& pool,
                  std::vector<std::int32_t>& tail);

  model::CacheConfig config_;
  bool settle_ = true; // the fast structures: skip a table's settled positions
  std::vector<BlockPool> pools_;
  RequestRecords<RequestBlocks> requests_;
  std::int64_t retired_across_null_ = 0;
  std::int32_t hash_unit_ = 0;
  bool duplicates_ = false; // allow_duplicate_boundaries
  struct Retained {
    std::int64_t step = -1; // -1: planned now, not taken yet
    std::size_t group = 0;
    std::int32_t block = 0;
    bool target = false; // the copy's destination (BlockPool::copy_target)
  };
  std::vector<model::BlockCopy> copies_; // planned now
  std::vector<Retained> retained_;
};

} // namespace mc::oracle::engine
