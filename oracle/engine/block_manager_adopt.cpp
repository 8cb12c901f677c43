// Tables chosen by another scheduler (a recorded trace), applied to the block manager model
// with the rules of block_manager.h, so that replay checks a trace's blocks exactly as a
// simulated run checks the scheduler's: which request holds which block, which blocks are
// shared through a prefix hit, which are freed (the previous running block, two steps back),
// which are registered for prefix reuse. The trace names the blocks; the model says what
// holding them means. A block the model still sees held by someone is never handed out again.
#include "oracle/engine/block_manager.h"

#include "model/block_table.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {

using model::kNullBlockId;

std::string held_block_message(std::size_t group, std::int32_t block_id, std::int32_t ref_count) {
  return fmt::format("block {} of group {} is handed out while it is still held ({} "
                     "reference{}): no block manager gives a held block again",
                     block_id, group, ref_count, ref_count == 1 ? "" : "s");
}

std::optional<std::string> BlockManager::adopt_first(const std::string& req_id,
                                                     const model::GroupBlockIds& table,
                                                     std::int32_t num_computed) {
  MC_ASSERT(table.size() == pools_.size());
  MC_ASSERT(num_computed >= 0 && num_computed % hash_unit_ == 0);
  free_request(req_id); // a resumed request's old table is gone already; be sure
  RequestBlocks& req = requests_.emplace(req_id, -1);
  req.groups.resize(pools_.size());
  req.allocated = true;
  // The column of the state after the hit (-1: no prefix hit); after a partial-hash hit it holds
  // the hit's private copy (adopt_copy), or a block shared without one, which the reads and
  // writes then judge.
  const auto hit =
      static_cast<std::int32_t>(model::cdiv(num_computed, config_.mamba_block_size)) - 1;
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    GroupRow& row = req.groups[g];
    for (std::size_t j = 0; j < table[g].size(); ++j) {
      const std::int32_t block = table[g][j];
      row.block_ids.push_back(block);
      if (block == kNullBlockId) continue;
      if (static_cast<std::int32_t>(j) == hit) {
        pools_[g].touch(block); // shared with the request that cached it, or revived
        continue;
      }
      if (!pools_[g].take_block(block))
        return held_block_message(g, block, pools_[g].ref_count(block)) +
               fmt::format(" (position {} of {}'s first table)", j, req_id);
    }
    if (hit >= 0) {
      if (hit >= static_cast<std::int32_t>(table[g].size()) ||
          table[g][static_cast<std::size_t>(hit)] == kNullBlockId)
        return fmt::format("a prefix hit of {} tokens needs the hit block at position {} of "
                           "group {}, but the table holds {}",
                           num_computed, hit, g,
                           hit < static_cast<std::int32_t>(table[g].size()) ? "the null block"
                                                                            : "no such position");
      if (config_.mode == model::CacheMode::align) row.last_state_idx = hit;
    }
  }
  return std::nullopt;
}

std::optional<std::string> BlockManager::adopt_copy(const model::BlockCopy& copy, bool to_hit,
                                                    std::int64_t step) {
  const auto g = static_cast<std::size_t>(copy.group);
  BlockPool& pool = pools_[g];
  const auto unreachable = [&pool](std::int32_t block) {
    return pool.ref_count(block) == 0 && !pool.queued(block) && !pool.reachable_held_back(block);
  };
  if (unreachable(copy.dst))
    return fmt::format("the destination of a block copy, block {} of group {}, is held back for "
                       "the step in flight",
                       copy.dst, g);
  if (!pool.take_block(copy.dst))
    return held_block_message(g, copy.dst, pool.ref_count(copy.dst)) +
           " (the destination of a block copy)";
  if (to_hit) {
    if (unreachable(copy.src))
      return fmt::format("a block copy reads block {} of group {}, held back for the step in "
                         "flight",
                         copy.src, g);
    pool.touch(copy.src); // the hit's reference (adopt_first adds the copy's table reference)
  } else if (pool.ref_count(copy.src) == 0) {
    return fmt::format("a block copy reads block {} of group {}, which no request holds", copy.src,
                       g);
  }
  retain_copy_ends(copy, /*producer=*/!to_hit, step);
  return std::nullopt;
}

std::optional<std::string> BlockManager::adopt_growth(const std::string& req_id,
                                                      const model::GroupBlockIds& appended) {
  MC_ASSERT(appended.size() == pools_.size());
  RequestBlocks* req = requests_.find(req_id);
  if (req == nullptr)
    return fmt::format("request {} grows a table it does not hold (preempted or finished)", req_id);
  const bool align = config_.mode == model::CacheMode::align;
  const std::int32_t nsb = config_.num_spec_blocks;
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    if (appended[g].empty()) continue;
    std::vector<std::int32_t>& t = req->groups[g].block_ids;
    const auto prev_len = static_cast<std::int32_t>(t.size());
    if (align) remember_state(req->groups[g], prev_len - 1 - nsb);
    for (const std::int32_t block : appended[g]) {
      if (block == kNullBlockId) {
        t.push_back(block);
        continue;
      }
      // An old speculative block that now sits before the running position moves to the
      // end: its old position becomes null, it keeps its one reference.
      const auto first_spec = static_cast<std::ptrdiff_t>(std::max(prev_len - nsb, 0));
      const auto old_end = t.begin() + prev_len;
      const auto moved = align ? std::find(t.begin() + first_spec, old_end, block) : old_end;
      if (moved != old_end) {
        *moved = kNullBlockId;
      } else if (!pools_[g].take_block(block)) {
        return held_block_message(g, block, pools_[g].ref_count(block)) +
               fmt::format(" (appended to {}'s table at position {})", req_id, t.size());
      }
      t.push_back(block);
    }
  }
  return std::nullopt;
}

void BlockManager::adopt_frees(const std::string& req_id, const model::GroupBlockIds& held) {
  RequestBlocks* req = requests_.find(req_id);
  if (req == nullptr || config_.mode != model::CacheMode::all) return;
  for (std::size_t g = 0; g < pools_.size() && g < held.size(); ++g) {
    std::vector<std::int32_t>& t = req->groups[g].block_ids;
    for (std::size_t p = 0; p < t.size() && p < held[g].size(); ++p)
      if (t[p] != kNullBlockId && held[g][p] == kNullBlockId) {
        pools_[g].free(t[p]);
        t[p] = kNullBlockId;
      }
  }
}

} // namespace mc::oracle::engine
