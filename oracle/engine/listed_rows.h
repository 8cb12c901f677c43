// Resolving a step's scheduled rows to the records kept for its new and cached requests.
//
// Two implementations (structures.h):
// - plain: each row's record is looked up by id.
// - fast: the scheduler lists new and cached requests in the order their rows take in the
//   batch (it builds the three lists in one pass), so walking both lists alongside the batch
//   finds a row's record with one id comparison. A row that neither list's next entry names (a
//   recorded trace may order the lists otherwise) is looked up by id; the record is the same
//   either way.
#pragma once

#include "oracle/engine/structures.h"

#include <cstddef>
#include <string>
#include <vector>

namespace mc::oracle::engine {

template <typename Record> class ListedRows {
public:
  explicit ListedRows(Structures structures) : walk_(structures == Structures::fast) {}

  void clear() {
    new_.clear();
    cached_.clear();
    next_new_ = 0;
    next_cached_ = 0;
  }
  // `id` must outlive the walk (it points into the step).
  void add_new(const std::string& id, Record& record) {
    if (walk_) new_.push_back({&id, &record});
  }
  void add_cached(const std::string& id, Record& record) {
    if (walk_) cached_.push_back({&id, &record});
  }

  // The record of the next scheduled row, `id`; `lookup(id)` when the lists do not say.
  template <typename Lookup> Record& next_row(const std::string& id, Lookup&& lookup) {
    if (next_cached_ < cached_.size() && *cached_[next_cached_].id == id)
      return *cached_[next_cached_++].record;
    if (next_new_ < new_.size() && *new_[next_new_].id == id) return *new_[next_new_++].record;
    return lookup(id);
  }

private:
  struct Entry {
    const std::string* id = nullptr;
    Record* record = nullptr;
  };
  bool walk_ = true; // the fast implementation: walk the lists (plain: they stay empty)
  std::vector<Entry> new_;
  std::vector<Entry> cached_;
  std::size_t next_new_ = 0;
  std::size_t next_cached_ = 0;
};

} // namespace mc::oracle::engine
