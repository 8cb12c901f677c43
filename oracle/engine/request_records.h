// Records kept per request id (the ledger's truths, the runner's states, the block manager's
// tables), found by id; a caller that has the request's dense key (model/step.h: the
// scheduler's number of the request, the same in every step) passes it along. Two
// implementations (structures.h):
// - plain: the map by id; the key is ignored.
// - fast: the key is a hint, to find a record in O(1) without hashing the id. A record is found
//   by its key when the record remembered under that key has the same id, else by id through
//   the map (then it is remembered under the key). So a missing key (-1, a recorded trace), a
//   key reused for another id, or a step a test edited finds the same record as a lookup by id.
// Records live in map nodes: their addresses stay valid until they are erased.
#pragma once

#include "model/errors.h"
#include "oracle/engine/structures.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::oracle::engine {

template <typename Record> class RequestRecords {
public:
  explicit RequestRecords(Structures structures) : keys_(structures == Structures::fast) {}

  Record* find(const std::string& id, std::int32_t key = -1) {
    Node* node = find_node(id, key);
    return node == nullptr ? nullptr : &node->record;
  }
  const Record* find(const std::string& id, std::int32_t key = -1) const {
    const Node* node = find_node(id, key);
    return node == nullptr ? nullptr : &node->record;
  }
  Record& at(const std::string& id, std::int32_t key = -1) {
    Record* r = find(id, key);
    MC_ASSERT(r != nullptr);
    return *r;
  }
  const Record& at(const std::string& id, std::int32_t key = -1) const {
    const Record* r = find(id, key);
    MC_ASSERT(r != nullptr);
    return *r;
  }
  bool contains(const std::string& id) const { return by_id_.contains(id); }
  bool empty() const { return by_id_.empty(); }

  // The record of `id`, value-initialised when it is new; `inserted` says which.
  Record& emplace(const std::string& id, std::int32_t key, bool* inserted = nullptr) {
    if (Node* node = find_node(id, key)) {
      if (inserted != nullptr) *inserted = false;
      return node->record;
    }
    const auto [it, fresh] = by_id_.try_emplace(id);
    MC_ASSERT(fresh);
    it->second.id = &it->first;
    remember(it->second, key);
    if (inserted != nullptr) *inserted = true;
    return it->second.record;
  }

  // f(id, record) for every record, in no particular order.
  template <typename F> void for_each(F&& f) const {
    for (const auto& [id, node] : by_id_)
      f(id, node.record);
  }

  // Erases the record of `id`, if any.
  void erase(const std::string& id) {
    const auto it = by_id_.find(id);
    if (it == by_id_.end()) return;
    const std::int32_t key = it->second.key;
    if (key >= 0 && by_key_[static_cast<std::size_t>(key)] == &it->second)
      by_key_[static_cast<std::size_t>(key)] = nullptr;
    by_id_.erase(it);
  }

private:
  struct Node {
    Record record{};
    const std::string* id = nullptr; // the map's key
    std::int32_t key = -1;           // where by_key_ may point at this node
  };

  Node* find_node(const std::string& id, std::int32_t key) const {
    if (keys_ && key >= 0 && static_cast<std::size_t>(key) < by_key_.size()) {
      Node* node = by_key_[static_cast<std::size_t>(key)];
      if (node != nullptr && *node->id == id) return node;
    }
    const auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    remember(it->second, key);
    return &it->second;
  }

  // Points `key` at `node` (a node is remembered under one key at most, so that erasing it
  // leaves no pointer behind).
  void remember(Node& node, std::int32_t key) const {
    if (!keys_) return;
    if (key < 0 || key == node.key) {
      if (key >= 0) by_key_[static_cast<std::size_t>(key)] = &node;
      return;
    }
    if (node.key >= 0 && by_key_[static_cast<std::size_t>(node.key)] == &node)
      by_key_[static_cast<std::size_t>(node.key)] = nullptr;
    const auto k = static_cast<std::size_t>(key);
    if (k >= by_key_.size()) by_key_.resize(k + 1, nullptr);
    by_key_[k] = &node;
    node.key = key;
  }

  bool keys_ = true; // the fast implementation: keys are hints
  // Both mutable: a lookup from a const method fills the key cache (never the records).
  mutable std::unordered_map<std::string, Node> by_id_;
  mutable std::vector<Node*> by_key_; // by key: a node of by_id_ or null
};

} // namespace mc::oracle::engine
