#include "oracle/engine/block_manager.h"

#include "model/block_table.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {

using model::kNullBlockId;

BlockManager::BlockManager(const model::CacheConfig& config, std::int32_t num_groups,
                           std::int32_t num_blocks, Structures structures, std::int32_t hash_unit)
    : config_(config), settle_(structures == Structures::fast), requests_(structures),
      hash_unit_(hash_unit == 0 ? config.mamba_block_size : hash_unit) {
  MC_ASSERT(num_groups >= 1 && num_groups <= model::kGroupsMax);
  MC_ASSERT(config.mode != model::CacheMode::none);
  MC_ASSERT(hash_unit_ >= 1 && config.mamba_block_size % hash_unit_ == 0);
  MC_ASSERT(hash_unit_ == config.mamba_block_size || config.mode == model::CacheMode::align);
  // Each group's free queue starts elsewhere, so its tables hold other ids than the other
  // groups' (vLLM's groups take their blocks from one shared pool): a kernel that indexes
  // every group through one group's table reads the wrong blocks.
  for (std::int32_t g = 0; g < num_groups; ++g)
    pools_.emplace_back(num_blocks, structures, 1 + g * (num_blocks - 1) / num_groups);
}

std::int32_t BlockManager::num_required(std::int32_t num_tokens) const {
  // Both modes carry nsb speculative columns after the block of the last token (all mode:
  // vLLM #41233, the columns a decode keeps its draft prefixes' states in).
  const auto blocks = static_cast<std::int32_t>(model::cdiv(num_tokens, config_.mamba_block_size));
  return blocks + config_.num_spec_blocks;
}

std::int32_t BlockManager::find_cache_hit(std::span<const model::TokenHash> boundary_hashes,
                                          std::int32_t positions_max) const {
  const auto n =
      std::min<std::int32_t>(positions_max, static_cast<std::int32_t>(boundary_hashes.size()));
  for (std::int32_t p = n - 1; p >= 0; --p) {
    bool everywhere = true;
    bool pending = false;
    for (std::size_t g = 0; g < pools_.size() && everywhere; ++g) {
      const auto block = pools_[g].lookup(boundary_hashes[static_cast<std::size_t>(p)]);
      everywhere = block.has_value();
      pending = pending || (block && copy_pending(g, *block));
    }
    // vLLM's MambaManager defers a hit on a block cached in this very planning.
    if (everywhere) return pending ? -2 : p;
  }
  return -1;
}

void BlockManager::start_with_hit(const std::string& req_id, std::int32_t hit_tokens,
                                  model::TokenHash boundary_hash) {
  MC_ASSERT(!requests_.contains(req_id));
  MC_ASSERT(hit_tokens > 0 && hit_tokens % hash_unit_ == 0);
  const std::int32_t B = config_.mamba_block_size;
  const auto position = static_cast<std::int32_t>(model::cdiv(hit_tokens, B)) - 1;
  RequestBlocks& req = requests_.emplace(req_id, -1);
  if (hit_tokens % B != 0) req.partial_col = position;
  req.groups.resize(pools_.size());
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    const std::optional<std::int32_t> block = pools_[g].lookup(boundary_hash);
    MC_ASSERT(block.has_value());
    pools_[g].touch(*block);
    req.groups[g].block_ids.assign(static_cast<std::size_t>(position), kNullBlockId);
    req.groups[g].block_ids.push_back(*block);
  }
}

std::int32_t BlockManager::num_new_blocks(const std::string& req_id,
                                          std::int32_t num_tokens) const {
  return num_new_blocks(find(req_id), num_tokens);
}

std::int32_t BlockManager::num_new_blocks(const RequestBlocks* found,
                                          std::int32_t num_tokens) const {
  const std::int32_t required = num_required(num_tokens);
  if (found == nullptr) // first allocation: align takes the running and spec blocks only
    return config_.mode == model::CacheMode::align ? 1 + config_.num_spec_blocks : required;
  const RequestBlocks& req = *found;
  const std::int32_t copy = req.partial_col >= 0 ? 1 : 0;
  const auto prev_len = static_cast<std::int32_t>(req.groups[0].block_ids.size());
  if (required <= prev_len) return copy;
  if (config_.mode != model::CacheMode::align) return required - prev_len;
  const std::int32_t nsb = config_.num_spec_blocks;
  const std::int32_t skipped = required - nsb - 1;
  std::int32_t len = std::max(prev_len, skipped);
  if (req.allocated) len += std::clamp(skipped - (prev_len - nsb), 0, nsb);
  return required - len + copy;
}

bool BlockManager::can_allocate(const std::string& req_id, std::int32_t num_tokens) const {
  const std::int32_t needed = num_new_blocks(req_id, num_tokens);
  return std::ranges::all_of(pools_, [&](const BlockPool& p) { return p.num_free() >= needed; });
}

bool BlockManager::can_allocate(const RequestBlocks& held, std::int32_t num_tokens) const {
  const std::int32_t needed = num_new_blocks(&held, num_tokens);
  return std::ranges::all_of(pools_, [&](const BlockPool& p) { return p.num_free() >= needed; });
}

bool BlockManager::can_allocate_after_release(const RequestBlocks& held,
                                              std::int32_t num_tokens) const {
  const std::int32_t needed = num_new_blocks(&held, num_tokens);
  return std::ranges::all_of(pools_, [&](const BlockPool& p) {
    return p.num_free() + static_cast<std::int32_t>(p.held_back_blocks().size()) >= needed;
  });
}

void BlockManager::grow_align(GroupRow& row, bool allocated, std::int32_t required, BlockPool& pool,
                              std::vector<std::int32_t>& tail) {
  std::vector<std::int32_t>& t = row.block_ids;
  const std::int32_t nsb = config_.num_spec_blocks;
  const auto prev_len = static_cast<std::int32_t>(t.size());
  if (allocated)
    remember_state(row, prev_len - 1 - nsb);
  else if (prev_len > 0)
    remember_state(row, prev_len - 1); // the prefix-hit block
  const std::int32_t skipped = required - nsb - 1;
  if (prev_len < skipped) t.resize(static_cast<std::size_t>(skipped), kNullBlockId);
  if (allocated) {
    for (std::int32_t i = prev_len - nsb; i < prev_len && i < skipped; ++i) {
      t.push_back(t[static_cast<std::size_t>(i)]); // an old spec block becomes a new one
      t[static_cast<std::size_t>(i)] = kNullBlockId;
    }
  }
  const std::int32_t num_new = required - static_cast<std::int32_t>(t.size());
  MC_ASSERT(num_new >= 0);
  MC_ASSERT(allocated ? num_new <= 1 : num_new <= nsb + 1);
  pool.take(num_new, t);
  tail.insert(tail.end(), t.begin() + prev_len, t.end());
}

model::GroupBlockIds BlockManager::allocate(const std::string& req_id, std::int32_t num_tokens) {
  bool inserted = false;
  RequestBlocks& req = requests_.emplace(req_id, -1, &inserted);
  if (inserted) req.groups.resize(pools_.size());
  model::GroupBlockIds tails;
  grow(req, inserted, num_tokens, tails);
  return tails;
}

void BlockManager::allocate(RequestBlocks& held, std::int32_t num_tokens,
                            model::GroupBlockIds& tails) {
  grow(held, false, num_tokens, tails);
}

void BlockManager::grow(RequestBlocks& req, bool first, std::int32_t num_tokens,
                        model::GroupBlockIds& tails) {
  MC_ASSERT(req.groups.size() == pools_.size());
  const std::int32_t needed = num_new_blocks(first ? nullptr : &req, num_tokens);
  for (const BlockPool& pool : pools_)
    MC_ASSERT(pool.num_free() >= needed); // can_allocate
  const std::int32_t required = num_required(num_tokens);
  if (req.partial_col >= 0) copy_partial(req);
  tails.resize(pools_.size());
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    tails[g].clear();
    GroupRow& row = req.groups[g];
    const auto prev_len = static_cast<std::int32_t>(row.block_ids.size());
    if (required <= prev_len) continue;
    if (config_.mode == model::CacheMode::align) {
      grow_align(row, req.allocated, required, pools_[g], tails[g]);
    } else {
      pools_[g].take(required - prev_len, tails[g]);
      row.block_ids.insert(row.block_ids.end(), tails[g].begin(), tails[g].end());
    }
  }
  req.allocated = true;
}

void BlockManager::copy_partial(RequestBlocks& req) {
  const auto col = static_cast<std::size_t>(req.partial_col);
  req.partial_col = -1;
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    BlockPool& pool = pools_[g];
    std::int32_t& entry = req.groups[g].block_ids[col];
    const std::int32_t source = entry;
    const std::int32_t copy = pool.take(1).front();
    const model::BlockCopy planned{
        .group = static_cast<std::int32_t>(g), .src = source, .dst = copy};
    copies_.push_back(planned);
    // The producer's table keeps its block, which its next tokens overwrite in place once the
    // copy has read it (the cached state lives on in the copy); a hit's shared block is swapped
    // for the private copy, which the request then writes.
    retain_copy_ends(planned, /*producer=*/req.allocated, -1);
    if (!req.allocated) {
      entry = copy;
      pool.touch(copy); // the table's reference, beside the retention
    }
  }
}

void BlockManager::retain_copy_ends(const model::BlockCopy& copy, bool producer,
                                    std::int64_t step) {
  const auto g = static_cast<std::size_t>(copy.group);
  BlockPool& pool = pools_[g];
  if (producer) {
    if (pool.cached(copy.src) != nullptr) pool.move_entry(copy.src, copy.dst);
    pool.retain(copy.src);
  } else {
    pool.keep_as_retained(copy.src); // the hit's reference, kept until the copy ran
  }
  pool.keep_as_retained(copy.dst); // its reference from the take
  pool.mark_copy_target(copy.dst);
  retained_.push_back({.step = step, .group = g, .block = copy.src});
  retained_.push_back({.step = step, .group = g, .block = copy.dst, .target = true});
}

std::vector<model::BlockCopy> BlockManager::take_copies(std::int64_t step) {
  for (Retained& r : retained_)
    if (r.step < 0) r.step = step;
  return std::exchange(copies_, {});
}

void BlockManager::release_copies(std::int64_t step) {
  std::erase_if(retained_, [&](const Retained& r) {
    if (r.step < 0 || r.step > step) return false;
    if (r.target) pools_[r.group].release_copy_target(r.block);
    pools_[r.group].release(r.block);
    return true;
  });
}

bool BlockManager::copy_pending(std::size_t group, std::int32_t block) const {
  return std::any_of(copies_.begin(), copies_.end(), [&](const model::BlockCopy& c) {
    return static_cast<std::size_t>(c.group) == group && c.dst == block;
  });
}

void BlockManager::remove_skipped(const std::string& req_id, std::int32_t num_computed) {
  if (RequestBlocks* held = find_held(req_id)) remove_skipped(*held, num_computed);
}

void BlockManager::remember_state(GroupRow& row, std::int32_t idx) {
  const std::int32_t last = row.last_state_idx;
  if (last >= 0 && last != idx && row.block_ids[static_cast<std::size_t>(last)] != kNullBlockId)
    row.older_state_idx.push_back(last);
  row.last_state_idx = idx;
}

void BlockManager::remove_skipped(RequestBlocks& held, std::int32_t num_computed) {
  if (config_.mode != model::CacheMode::align) return;
  const auto stale_below =
      static_cast<std::int32_t>(model::cdiv(num_computed, config_.mamba_block_size)) - 1;
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    GroupRow& row = held.groups[g];
    // The highest column below the threshold that was null before this retirement.
    const auto below = std::min(stale_below, static_cast<std::int32_t>(row.block_ids.size()));
    std::int32_t gap = -1;
    for (std::int32_t i = below - 1; i >= 0 && gap < 0; --i)
      if (row.block_ids[static_cast<std::size_t>(i)] == kNullBlockId) gap = i;
    const auto drop = [&](std::int32_t idx) {
      std::int32_t& block = row.block_ids[static_cast<std::size_t>(idx)];
      if (block != kNullBlockId) {
        pools_[g].free(block); // a cached block stays findable
        if (idx < gap) ++retired_across_null_;
      }
      block = kNullBlockId;
    };
    std::erase_if(row.older_state_idx, [&](std::int32_t idx) {
      if (idx >= stale_below) return false;
      drop(idx);
      return true;
    });
    if (row.last_state_idx < 0 || row.last_state_idx >= stale_below) continue;
    drop(row.last_state_idx);
  }
}

void BlockManager::free_request(const std::string& req_id) {
  const RequestBlocks* req = requests_.find(req_id);
  if (req == nullptr) return;
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    const std::vector<std::int32_t>& t = req->groups[g].block_ids;
    for (auto b = t.rbegin(); b != t.rend(); ++b) // tail first: evicted first, as vLLM
      if (*b != kNullBlockId) pools_[g].free(*b);
  }
  requests_.erase(req_id);
}

void BlockManager::cache_blocks(const std::string& req_id, std::int32_t num_computed,
                                std::span<const model::TokenHash> prefix_hashes,
                                std::span<const std::int32_t> tokens, std::int32_t tail_len,
                                std::int32_t num_prompt) {
  if (RequestBlocks* held = find_held(req_id))
    cache_blocks(*held, num_computed, prefix_hashes, tokens, tail_len, num_prompt);
}

void BlockManager::cache_blocks(RequestBlocks& held, std::int32_t num_computed,
                                std::span<const model::TokenHash> prefix_hashes,
                                std::span<const std::int32_t> tokens, std::int32_t tail_len,
                                std::int32_t num_prompt) {
  const std::int32_t B = config_.mamba_block_size;
  if (hash_unit_ < B && num_prompt > 0 && held.partial_col < 0 && num_computed % B != 0 &&
      num_computed == num_prompt / hash_unit_ * hash_unit_)
    register_partial(held, num_computed, prefix_hashes, tokens, tail_len);
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    GroupRow& row = held.groups[g];
    const std::vector<std::int32_t>& t = row.block_ids;
    const auto n = std::min<std::int32_t>(num_computed / B, static_cast<std::int32_t>(t.size()));
    bool settled = true; // every position so far is null or cached
    for (std::int32_t p = settle_ ? row.settled_positions : 0; p < n; ++p) {
      const std::int32_t block = t[static_cast<std::size_t>(p)];
      if (block == kNullBlockId || pools_[g].cached(block) != nullptr) {
        if (settled) row.settled_positions = p + 1;
        continue;
      }
      const std::int32_t end = (p + 1) * B;
      const std::int32_t begin = std::max(0, end - tail_len);
      pools_[g].register_block(
          block, prefix_hashes[static_cast<std::size_t>(end)], p,
          tokens.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
          end);
      // Refused when another block holds the boundary: tried again next time.
      settled = settled && pools_[g].cached(block) != nullptr;
      if (settled) row.settled_positions = p + 1;
    }
  }
}

void BlockManager::register_partial(RequestBlocks& held, std::int32_t num_tokens,
                                    std::span<const model::TokenHash> prefix_hashes,
                                    std::span<const std::int32_t> tokens, std::int32_t tail_len) {
  const std::int32_t col = num_tokens / config_.mamba_block_size;
  const model::TokenHash hash = prefix_hashes[static_cast<std::size_t>(num_tokens)];
  // In every group or none: a hit needs every group, and the copy is of every group.
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    const std::vector<std::int32_t>& t = held.groups[g].block_ids;
    if (col >= static_cast<std::int32_t>(t.size())) return;
    const std::int32_t block = t[static_cast<std::size_t>(col)];
    if (block == kNullBlockId || pools_[g].cached(block) != nullptr ||
        (!duplicates_ && pools_[g].lookup(hash)))
      return;
  }
  const std::int32_t begin = std::max(0, num_tokens - tail_len);
  const auto tail =
      tokens.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(num_tokens - begin));
  for (std::size_t g = 0; g < pools_.size(); ++g)
    pools_[g].register_block(held.groups[g].block_ids[static_cast<std::size_t>(col)], hash, col,
                             tail, num_tokens);
  held.partial_col = col;
}

void BlockManager::mark_in_flight(const RequestBlocks& held, std::int32_t row_start) {
  MC_ASSERT(held.groups.size() == pools_.size() && row_start >= 0);
  const std::int32_t touched_from = row_start > 0 ? (row_start - 1) / config_.mamba_block_size : 0;
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    const std::vector<std::int32_t>& row = held.groups[g].block_ids;
    for (std::size_t i = 0; i < row.size(); ++i)
      if (row[i] != kNullBlockId)
        pools_[g].mark_in_flight(row[i], static_cast<std::int32_t>(i) >= touched_from);
  }
}

void BlockManager::release_in_flight() {
  for (BlockPool& pool : pools_)
    pool.release_in_flight();
}

std::int64_t BlockManager::frees_held_back() const {
  std::int64_t n = 0;
  for (const BlockPool& pool : pools_)
    n += pool.frees_held_back();
  return n;
}

void BlockManager::reset_cache() {
  MC_ASSERT(requests_.empty());
  for (BlockPool& pool : pools_)
    pool.reset_cache();
}

std::optional<std::string> BlockManager::check_accounting() const {
  for (std::size_t g = 0; g < pools_.size(); ++g) {
    const BlockPool& pool = pools_[g];
    std::vector<std::int32_t> held(static_cast<std::size_t>(pool.num_blocks()), 0);
    requests_.for_each([&](const std::string&, const RequestBlocks& r) {
      if (g < r.groups.size())
        for (const std::int32_t block : r.groups[g].block_ids)
          if (block != kNullBlockId) ++held[static_cast<std::size_t>(block)];
    });
    for (std::int32_t b = 1; b < pool.num_blocks(); ++b) {
      const std::int32_t refs = pool.ref_count(b) - pool.retained(b);
      const std::int32_t tables = held[static_cast<std::size_t>(b)];
      const bool queued = pool.queued(b);
      const bool held_back = pool.held_back(b);
      if (refs != tables)
        return fmt::format("block {} of group {} has {} references, but {} table entries hold it",
                           b, g, refs, tables);
      if (refs + pool.retained(b) > 0 && (queued || held_back))
        return fmt::format("block {} of group {} is held by a request and {}", b, g,
                           queued ? "in the free queue" : "held back as freed");
      if (refs + pool.retained(b) == 0 && queued == held_back)
        return fmt::format("block {} of group {} is referenced by nobody and {}", b, g,
                           queued ? "both free and held back" : "neither free nor held back");
    }
  }
  return std::nullopt;
}

} // namespace mc::oracle::engine
