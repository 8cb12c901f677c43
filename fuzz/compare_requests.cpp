// Per-request arrays: the first array (in RequestArrays order) whose length or an
// entry differs, with the entry's meaning: its slot and the batch row mapped to it.
#include "fuzz/compare.h"

#include "model/request_arrays.h"

#include <fmt/format.h>

#include <vector>

namespace mc::fuzz::detail {
namespace {

using model::ArrayIndexing;

// "slot 5, batch row 2" / "slot 5, not in the batch" / "batch row 2"
std::string entry_context(const model::LaunchCase& launch, ArrayIndexing indexing,
                          std::int32_t i) {
  if (indexing == ArrayIndexing::by_batch_row) return fmt::format("batch row {}", i);
  if (indexing == ArrayIndexing::by_row_boundary) return fmt::format("start of batch row {}", i);
  const auto& map = launch.requests.idx_mapping;
  if (map.empty()) return fmt::format("slot {}, batch row {}", i, i);
  for (std::size_t b = 0; b < map.size(); ++b)
    if (map[b] == i) return fmt::format("slot {}, batch row {}", i, b);
  return fmt::format("slot {}, not in the batch", i);
}

} // namespace

std::optional<Difference> compare_requests(const model::LaunchCase& launch,
                                           const model::RequestArrays& expected,
                                           const model::RequestArrays& actual) {
  for (const model::RequestArrayField& a : model::kRequestArrays) {
    const std::vector<std::int32_t>& e = expected.*(a.member);
    const std::vector<std::int32_t>& x = actual.*(a.member);
    if (e.size() != x.size())
      return Difference{.category = DifferenceCategory::requests,
                        .message = fmt::format("requests: array {} has {} entries; expected {}",
                                               a.name, x.size(), e.size()),
                        .array = std::string(a.name)};
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (e[i] == x[i]) continue;
      const auto index = static_cast<std::int32_t>(i);
      return Difference{.category = DifferenceCategory::requests,
                        .message =
                            fmt::format("requests: {}[{}] ({}): expected {}, actual {}", a.name, i,
                                        entry_context(launch, a.indexing, index), e[i], x[i]),
                        .array = std::string(a.name),
                        .index = index};
    }
  }
  return std::nullopt;
}

} // namespace mc::fuzz::detail
