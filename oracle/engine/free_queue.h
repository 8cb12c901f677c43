// The free queue of one block pool: blocks nobody references, least recently freed first.
//
// FreeQueue is the interface the pool uses, over one of two implementations (structures.h):
// - FreeList, the plain one: a doubly linked list threaded through the blocks (each block knows
//   its neighbours), as vLLM's free block queue; a touched block leaves from the middle.
// - FreeDeque, the fast one: a deque of (block, generation) entries with lazy removal. A block
//   that leaves from the middle only gets a new generation; its entry goes stale and pop_front
//   skips it. No node per push.
#pragma once

#include "model/errors.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace mc::oracle::engine {

class FreeList {
public:
  explicit FreeList(std::int32_t num_blocks)
      : prev_(static_cast<std::size_t>(num_blocks), kNone),
        next_(static_cast<std::size_t>(num_blocks), kNone),
        queued_(static_cast<std::size_t>(num_blocks), false) {}

  bool contains(std::int32_t block_id) const {
    MC_ASSERT(block_id >= 0 && static_cast<std::size_t>(block_id) < queued_.size());
    return queued_[static_cast<std::size_t>(block_id)];
  }
  std::int32_t size() const { return size_; }
  void push_back(std::int32_t block_id) {
    MC_ASSERT(!contains(block_id));
    const auto b = static_cast<std::size_t>(block_id);
    prev_[b] = tail_;
    next_[b] = kNone;
    if (tail_ == kNone)
      head_ = block_id;
    else
      next_[static_cast<std::size_t>(tail_)] = block_id;
    tail_ = block_id;
    queued_[b] = true;
    ++size_;
  }
  std::int32_t pop_front() {
    MC_ASSERT(size_ > 0);
    const std::int32_t block_id = head_;
    remove(block_id);
    return block_id;
  }
  void remove(std::int32_t block_id) {
    MC_ASSERT(contains(block_id));
    const auto b = static_cast<std::size_t>(block_id);
    const std::int32_t prev = prev_[b];
    const std::int32_t next = next_[b];
    if (prev == kNone)
      head_ = next;
    else
      next_[static_cast<std::size_t>(prev)] = next;
    if (next == kNone)
      tail_ = prev;
    else
      prev_[static_cast<std::size_t>(next)] = prev;
    queued_[b] = false;
    --size_;
  }

private:
  static constexpr std::int32_t kNone = -1;
  std::vector<std::int32_t> prev_; // by block id: the block before it in the queue, or kNone
  std::vector<std::int32_t> next_; // by block id: the block after it, or kNone
  std::vector<bool> queued_;
  std::int32_t head_ = kNone;
  std::int32_t tail_ = kNone;
  std::int32_t size_ = 0;
};

class FreeDeque {
public:
  explicit FreeDeque(std::int32_t num_blocks)
      : generation_(static_cast<std::size_t>(num_blocks), 0),
        queued_(static_cast<std::size_t>(num_blocks), false) {}

  bool contains(std::int32_t block_id) const {
    MC_ASSERT(block_id >= 0 && static_cast<std::size_t>(block_id) < queued_.size());
    return queued_[static_cast<std::size_t>(block_id)];
  }
  std::int32_t size() const { return size_; }
  void push_back(std::int32_t block_id) {
    MC_ASSERT(!contains(block_id));
    const auto b = static_cast<std::size_t>(block_id);
    queued_[b] = true;
    ++generation_[b];
    entries_.emplace_back(block_id, generation_[b]);
    ++size_;
  }
  std::int32_t pop_front() {
    MC_ASSERT(size_ > 0);
    for (;;) {
      MC_ASSERT(!entries_.empty());
      const auto [block_id, generation] = entries_.front();
      entries_.pop_front();
      const auto b = static_cast<std::size_t>(block_id);
      if (!queued_[b] || generation_[b] != generation) continue; // removed since
      queued_[b] = false;
      --size_;
      return block_id;
    }
  }
  void remove(std::int32_t block_id) { // its entry goes stale
    MC_ASSERT(contains(block_id));
    queued_[static_cast<std::size_t>(block_id)] = false;
    --size_;
  }

private:
  std::vector<std::uint32_t> generation_; // an entry is live iff it carries its block's
  std::vector<bool> queued_;
  std::deque<std::pair<std::int32_t, std::uint32_t>> entries_;
  std::int32_t size_ = 0;
};

class FreeQueue {
public:
  FreeQueue(std::int32_t num_blocks, Structures structures)
      : plain_(structures == Structures::reference), list_(plain_ ? num_blocks : 0),
        deque_(plain_ ? 0 : num_blocks) {}

  bool contains(std::int32_t block_id) const {
    return plain_ ? list_.contains(block_id) : deque_.contains(block_id);
  }
  std::int32_t size() const { return plain_ ? list_.size() : deque_.size(); }
  // Asserts the block is not queued.
  void push_back(std::int32_t block_id) {
    plain_ ? list_.push_back(block_id) : deque_.push_back(block_id);
  }
  // Asserts the queue is not empty.
  std::int32_t pop_front() { return plain_ ? list_.pop_front() : deque_.pop_front(); }
  // Asserts the block is queued.
  void remove(std::int32_t block_id) { plain_ ? list_.remove(block_id) : deque_.remove(block_id); }

private:
  bool plain_ = false;
  FreeList list_;   // when plain_
  FreeDeque deque_; // otherwise
};

} // namespace mc::oracle::engine
