#include "oracle/engine/cached_selection.h"

#include <algorithm>
#include <optional>

namespace mc::oracle::engine {

void CachedSelection::select(std::span<const BlockPool> pools, bool sweep_all) {
  checked_.resize(pools.size());
  selected_.resize(pools.size());
  registrations_.resize(pools.size());
  for (std::size_t g = 0; g < pools.size(); ++g) {
    const BlockPool& pool = pools[g];
    std::vector<CheckedBlock>& checked = checked_[g];
    checked.resize(static_cast<std::size_t>(pool.num_blocks()));
    std::vector<Entry>& list = selected_[g];
    list.clear();
    const auto consider = [&](std::int32_t block) {
      const CachedBlock* entry = pool.cached(block);
      // A cache entry moved to a copy not run yet is checked once the copy's step completed
      // (its release logs it again).
      if (entry == nullptr || pool.copy_target(block)) return;
      const CheckedBlock& seen = checked[static_cast<std::size_t>(block)];
      if (!sweep_all && seen.seen && seen.hash == entry->hash) return;
      list.emplace_back(block, entry);
    };
    Registrations& since = registrations_[g];
    const std::optional<std::span<const std::int32_t>> fresh =
        since_log_ && !sweep_all && since.pool == &pool ? pool.registered_since(since.seen)
                                                        : std::nullopt;
    if (fresh) {
      for (const std::int32_t block : *fresh)
        consider(block);
      std::sort(list.begin(), list.end(),
                [](const Entry& x, const Entry& y) { return x.first < y.first; });
      list.erase(std::unique(list.begin(), list.end(),
                             [](const Entry& x, const Entry& y) { return x.first == y.first; }),
                 list.end());
    } else {
      for (std::int32_t block = 1; block < pool.num_blocks(); ++block)
        consider(block);
    }
    since = {.pool = &pool, .seen = pool.num_registrations()};
  }
}

void CachedSelection::mark_checked() {
  for (std::size_t g = 0; g < selected_.size(); ++g)
    for (const auto& [block, entry] : selected_[g])
      checked_[g][static_cast<std::size_t>(block)] = {.hash = entry->hash, .seen = true};
}

} // namespace mc::oracle::engine
