#include "oracle/engine/block_pool.h"

#include "model/block_table.h"
#include "model/errors.h"

#include <algorithm>

namespace mc::oracle::engine {

BlockPool::BlockPool(std::int32_t num_blocks, Structures structures, std::int32_t first)
    : ref_count_(static_cast<std::size_t>(num_blocks), 0),
      retained_(static_cast<std::size_t>(num_blocks), 0),
      copy_target_(static_cast<std::size_t>(num_blocks), 0), free_(num_blocks, structures),
      in_flight_(static_cast<std::size_t>(num_blocks), 0), by_hash_(num_blocks, structures),
      entries_(static_cast<std::size_t>(num_blocks)),
      is_cached_(static_cast<std::size_t>(num_blocks), 0) {
  MC_ASSERT(num_blocks >= 2 && first >= 1 && first < num_blocks);
  ref_count_[0] = 1; // the null block is held forever
  for (std::int32_t i = 0; i < num_blocks - 1; ++i)
    free_.push_back(1 + (first - 1 + i) % (num_blocks - 1));
}

std::vector<std::int32_t> BlockPool::take(std::int32_t count) {
  std::vector<std::int32_t> blocks;
  take(count, blocks);
  return blocks;
}

void BlockPool::take(std::int32_t count, std::vector<std::int32_t>& blocks) {
  MC_ASSERT(count >= 0 && count <= num_free());
  for (std::int32_t taken = 0; taken < count; ++taken) {
    const std::int32_t block_id = free_.pop_front();
    const auto b = static_cast<std::size_t>(block_id);
    MC_ASSERT(ref_count_[b] == 0);
    evict(block_id);
    ref_count_[b] = 1;
    blocks.push_back(block_id);
    ++blocks_taken_;
  }
}

bool BlockPool::take_block(std::int32_t block_id) {
  const std::size_t b = real_index_of(block_id);
  if (ref_count_[b] != 0) return false;
  if (held_back(block_id)) {
    MC_ASSERT(reachable_held_back(block_id)); // the caller reports a touchable one itself
    unhold(block_id);
  } else {
    free_.remove(block_id);
  }
  evict(block_id);
  ref_count_[b] = 1;
  ++blocks_taken_;
  return true;
}

void BlockPool::touch(std::int32_t block_id) {
  const std::size_t b = real_index_of(block_id);
  if (ref_count_[b] == 0 && reachable_held_back(block_id)) {
    unhold(block_id);
  } else if (ref_count_[b] == 0) {
    MC_ASSERT(free_.contains(block_id)); // a held-back free is not in the cache's reach yet
    free_.remove(block_id);
  }
  ++ref_count_[b];
}

void BlockPool::free(std::int32_t block_id) {
  const std::size_t b = real_index_of(block_id);
  MC_ASSERT(ref_count_[b] > 0);
  if (--ref_count_[b] > 0) return;
  if (in_flight_[b] != 0) {
    held_.push_back(block_id);
    held_after_takes_.push_back(blocks_taken_);
    ++frees_held_back_;
    return;
  }
  free_.push_back(block_id);
}

void BlockPool::retain(std::int32_t block_id) {
  const std::size_t b = real_index_of(block_id);
  MC_ASSERT(ref_count_[b] > 0); // a block its request holds
  ++ref_count_[b];
  ++retained_[b];
}

void BlockPool::keep_as_retained(std::int32_t block_id) {
  const std::size_t b = real_index_of(block_id);
  MC_ASSERT(ref_count_[b] > retained_[b]);
  ++retained_[b];
}

void BlockPool::release(std::int32_t block_id) {
  const std::size_t b = real_index_of(block_id);
  MC_ASSERT(retained_[b] > 0);
  --retained_[b];
  free(block_id);
}

void BlockPool::mark_copy_target(std::int32_t block_id) {
  ++copy_target_[real_index_of(block_id)];
}

void BlockPool::release_copy_target(std::int32_t block_id) {
  MC_ASSERT(copy_target(block_id));
  if (--copy_target_[static_cast<std::size_t>(block_id)] == 0 && cached(block_id) != nullptr)
    log_registration(block_id);
}

void BlockPool::mark_in_flight(std::int32_t block_id, bool touchable) {
  const std::size_t b = real_index_of(block_id);
  MC_ASSERT(ref_count_[b] > 0); // a block of a table in flight is held by its request
  if (in_flight_[b] == 0) in_flight_list_.push_back(block_id);
  in_flight_[b] = std::max(in_flight_[b], touchable ? kTouchable : kHeld);
}

void BlockPool::unhold(std::int32_t block_id) {
  const auto at = std::find(held_.begin(), held_.end(), block_id);
  MC_ASSERT(at != held_.end());
  held_after_takes_.erase(held_after_takes_.begin() + (at - held_.begin()));
  held_.erase(at);
}

void BlockPool::release_in_flight() {
  for (const std::int32_t block_id : in_flight_list_)
    in_flight_[static_cast<std::size_t>(block_id)] = 0;
  in_flight_list_.clear();
  for (const std::int32_t block_id : held_) // each freed once: nothing takes a held-back block
    if (ref_count_[static_cast<std::size_t>(block_id)] == 0) free_.push_back(block_id);
  held_.clear();
  held_after_takes_.clear();
}

std::optional<std::int32_t> BlockPool::lookup(model::TokenHash hash, bool strict) const {
  const std::optional<std::int32_t> block = by_hash_.find(hash);
  if (!block) return std::nullopt;
  const auto b = static_cast<std::size_t>(*block);
  // A held-back free is neither referenced nor in the queue: not reachable until released,
  // unless the step in flight cannot touch it and this pool judges another's frees.
  if (ref_count_[b] == 0 && !free_.contains(*block) && (strict || !reachable_held_back(*block)))
    return std::nullopt;
  return block;
}

void BlockPool::register_block(std::int32_t block_id, model::TokenHash hash, std::int32_t position,
                               std::span<const std::int32_t> tail_tokens, std::int32_t num_tokens) {
  const std::size_t b = real_index_of(block_id);
  MC_ASSERT(is_cached_[b] == 0);
  if (!by_hash_.insert(hash, block_id)) { // another block holds this boundary
    if (!duplicates_) return;
    more_holders_[hash].push_back(block_id);
  }
  CachedBlock& entry = entries_[b];
  entry.hash = hash;
  entry.position = position;
  entry.num_tokens = num_tokens;
  entry.tail_tokens.assign(tail_tokens.begin(), tail_tokens.end());
  is_cached_[b] = 1;
  log_registration(block_id);
}

void BlockPool::log_registration(std::int32_t block_id) {
  const std::size_t log_max = 4 * static_cast<std::size_t>(num_blocks()) + 1024;
  if (log_.size() >= log_max) { // drop the older half (amortised O(1) per registration)
    const std::size_t dropped = log_.size() / 2;
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(dropped));
    log_base_ += dropped;
  }
  log_.push_back(block_id);
}

void BlockPool::move_entry(std::int32_t from, std::int32_t to) {
  const CachedBlock* entry = cached(from);
  MC_ASSERT(entry != nullptr && cached(to) == nullptr && ref_count(to) > 0);
  const CachedBlock moved = *entry;
  evict(from);
  register_block(to, moved.hash, moved.position, moved.tail_tokens, moved.num_tokens);
}

std::optional<std::span<const std::int32_t>>
BlockPool::registered_since(std::uint64_t since) const {
  if (since < log_base_ || since > num_registrations()) return std::nullopt;
  return std::span(log_).subspan(static_cast<std::size_t>(since - log_base_));
}

bool BlockPool::taken_elsewhere(std::int32_t block_id) {
  if (ref_count(block_id) > 0) return false;
  if (cached(block_id) != nullptr) evict(block_id);
  return true;
}

void BlockPool::evict(std::int32_t block_id) {
  const auto b = static_cast<std::size_t>(block_id);
  if (is_cached_[b] == 0) return;
  is_cached_[b] = 0;
  const model::TokenHash hash = entries_[b].hash;
  const auto more = more_holders_.find(hash);
  if (by_hash_.find(hash) != block_id) { // a later holder
    MC_ASSERT(more != more_holders_.end());
    std::erase(more->second, block_id);
    if (more->second.empty()) more_holders_.erase(more);
    return;
  }
  by_hash_.erase(hash);
  if (more == more_holders_.end()) return;
  MC_ASSERT(!more->second.empty()); // an entry is erased with its last holder
  by_hash_.insert(hash, more->second.front());
  more->second.erase(more->second.begin());
  if (more->second.empty()) more_holders_.erase(more);
}

void BlockPool::reset_cache() {
  // Only the retained ends of copies of a step in flight may still be referenced.
  for (std::size_t b = 1; b < ref_count_.size(); ++b)
    MC_ASSERT(ref_count_[b] == retained_[b]);
  by_hash_.clear();
  more_holders_.clear();
  std::fill(is_cached_.begin(), is_cached_.end(), 0);
}

} // namespace mc::oracle::engine
