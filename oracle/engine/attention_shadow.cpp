#include "oracle/engine/attention_shadow.h"

#include "model/errors.h"

#include <algorithm>

namespace mc::oracle::engine {

AttentionShadow::AttentionShadow(std::int32_t num_groups, std::int32_t block_size)
    : num_groups_(num_groups), block_size_(std::max(block_size, 1)),
      by_block_(static_cast<std::size_t>(num_groups)),
      partial_by_block_(static_cast<std::size_t>(num_groups)),
      holders_(static_cast<std::size_t>(num_groups)) {
  MC_ASSERT(num_groups >= 0);
}

AttentionShadow AttentionShadow::prefixes_only(std::int32_t block_size) {
  AttentionShadow a(1, block_size);
  a.tables_known_ = false;
  return a;
}

void AttentionShadow::note_taken(const std::vector<std::int32_t>& ids, std::size_t from,
                                 std::vector<std::int32_t>& taken) {
  for (std::size_t i = from; i < ids.size(); ++i) {
    evict(ids[i]);
    taken.push_back(ids[i]);
  }
}

void AttentionShadow::start(const std::string& req_id, const model::GroupBlockIds& tables,
                            std::int32_t hit_tokens, std::vector<std::int32_t>& taken) {
  if (!active() || !tables_known_) return;
  MC_ASSERT(static_cast<std::int32_t>(tables.size()) == num_groups_);
  const auto hits = static_cast<std::size_t>(std::max(hit_tokens, 0) / block_size_);
  for (const std::vector<std::int32_t>& ids : tables)
    note_taken(ids, std::min(hits, ids.size()), taken);
  tables_[req_id] = {.groups = tables, .registered = static_cast<std::int32_t>(hits) * block_size_};
}

void AttentionShadow::grow(const std::string& req_id, const model::GroupBlockIds& appended,
                           std::vector<std::int32_t>& taken) {
  if (!active() || !tables_known_) return;
  MC_ASSERT(static_cast<std::int32_t>(appended.size()) == num_groups_);
  Tables& t = tables_[req_id];
  t.groups.resize(appended.size());
  for (std::size_t g = 0; g < appended.size(); ++g) {
    note_taken(appended[g], 0, taken);
    t.groups[g].insert(t.groups[g].end(), appended[g].begin(), appended[g].end());
  }
}

void AttentionShadow::reset() {
  tables_.clear();
  for (auto* maps : {&by_block_, &partial_by_block_})
    for (auto& m : *maps)
      m.clear();
  for (auto& m : holders_)
    m.clear();
}

void AttentionShadow::register_blocks(const std::string& req_id,
                                      std::span<const model::TokenHash> hashes,
                                      std::int32_t num_tokens, std::int32_t num_prompt) {
  if (!active()) return;
  const auto it = tables_known_ ? tables_.find(req_id) : tables_.try_emplace(req_id).first;
  if (it == tables_.end()) return;
  Tables& t = it->second;
  // The state after `tokens` tokens, held by each group's block at position p (`entries`:
  // by_block_, or partial_by_block_ for a partial tail).
  const auto hold = [&](std::int32_t tokens, std::int32_t p, auto& entries) {
    const model::TokenHash hash = hashes[static_cast<std::size_t>(tokens)];
    if (!tables_known_) {
      holders_[0].try_emplace(hash, 1);
      return;
    }
    for (std::size_t g = 0; g < t.groups.size(); ++g) {
      if (static_cast<std::size_t>(p) >= t.groups[g].size()) continue;
      const std::int32_t block = t.groups[g][static_cast<std::size_t>(p)];
      if (entries[g].contains(block)) continue; // a hit block, or registered before
      entries[g][block] = hash;
      ++holders_[g][hash];
    }
  };
  const std::int32_t end =
      std::min<std::int32_t>(num_tokens, static_cast<std::int32_t>(hashes.size()) - 1) /
      block_size_ * block_size_;
  for (std::int32_t covered = t.registered + block_size_; covered <= end; covered += block_size_)
    hold(covered, covered / block_size_ - 1, by_block_);
  t.registered = std::max(t.registered, end);
  if (hash_unit_ <= 0) return;
  const std::int32_t tail = num_prompt / hash_unit_ * hash_unit_;
  if (tail == 0 || tail % block_size_ == 0 ||
      tail > std::min<std::int32_t>(num_tokens, static_cast<std::int32_t>(hashes.size()) - 1))
    return;
  hold(tail, tail / block_size_, partial_by_block_);
}

void AttentionShadow::evict(std::int32_t block_id) {
  for (std::size_t g = 0; g < by_block_.size(); ++g)
    for (auto* entries : {&by_block_[g], &partial_by_block_[g]}) {
      const auto it = entries->find(block_id);
      if (it == entries->end()) continue;
      const auto h = holders_[g].find(it->second);
      if (h != holders_[g].end() && --h->second == 0) holders_[g].erase(h);
      entries->erase(it);
    }
}

std::int32_t AttentionShadow::longest_hit(std::span<const model::TokenHash> hashes,
                                          std::int32_t cap) const {
  const auto cached = [&](std::int32_t end) {
    const model::TokenHash hash = hashes[static_cast<std::size_t>(end)];
    return std::all_of(holders_.begin(), holders_.end(),
                       [&](const auto& h) { return h.contains(hash); });
  };
  const std::int32_t last = std::min(cap, static_cast<std::int32_t>(hashes.size()) - 1);
  std::int32_t hit = 0;
  while (hit + block_size_ <= last && cached(hit + block_size_))
    hit += block_size_;
  if (hash_unit_ <= 0 || hash_unit_ >= block_size_) return hit;
  for (std::int32_t end = std::min(hit + block_size_ - hash_unit_, last / hash_unit_ * hash_unit_);
       end > hit; end -= hash_unit_)
    if (cached(end)) return end;
  return hit;
}

} // namespace mc::oracle::engine
