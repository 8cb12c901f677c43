// InputBatchRows (input_batch.h).
#include "model/input_batch.h"

#include <unordered_set>

namespace mc::model {

void InputBatchRows::update(std::span<const std::string> req_ids) {
  const std::unordered_set<std::string> scheduled(req_ids.begin(), req_ids.end());
  for (std::string& id : rows_) {
    if (id.empty() || scheduled.contains(id)) continue;
    index_.erase(id);
    id.clear();
  }
  // New requests take the lowest holes, then rows at the end.
  std::size_t hole = 0;
  for (const std::string& id : req_ids) {
    if (index_.contains(id)) continue;
    while (hole < rows_.size() && !rows_[hole].empty())
      ++hole;
    if (hole == rows_.size()) rows_.emplace_back();
    rows_[hole] = id;
    index_[id] = static_cast<std::int32_t>(hole);
  }
  // condense(): the last occupied row moves into the lowest hole until none is left.
  std::size_t low = 0;
  while (true) {
    while (!rows_.empty() && rows_.back().empty())
      rows_.pop_back();
    while (low < rows_.size() && !rows_[low].empty())
      ++low;
    if (low >= rows_.size()) break;
    rows_[low] = std::move(rows_.back());
    rows_.pop_back();
    index_[rows_[low]] = static_cast<std::int32_t>(low);
  }
}

void InputBatchRows::update(std::span<const ScheduledRequest> scheduled) {
  std::vector<std::string> ids;
  ids.reserve(scheduled.size());
  for (const ScheduledRequest& s : scheduled)
    ids.push_back(s.req_id);
  update(ids);
}

std::int32_t InputBatchRows::row_of(const std::string& req_id) const {
  const auto it = index_.find(req_id);
  return it == index_.end() ? -1 : it->second;
}

const std::string& InputBatchRows::at(std::int32_t row) const {
  static const std::string none;
  return row >= 0 && row < size() ? rows_[static_cast<std::size_t>(row)] : none;
}

} // namespace mc::model
