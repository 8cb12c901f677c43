// Per-request arrays: the first array (in RequestArrays order) whose length or an
// entry differs, with the entry's meaning: its slot and the batch row mapped to it.
#include "fuzz/compare.h"

#include <fmt/format.h>

#include <array>
#include <vector>

namespace mc::fuzz::detail {
namespace {

using Array = std::vector<std::int32_t> model::RequestArrays::*;

enum class Indexing : std::uint8_t { by_slot, by_batch_row, by_row_boundary };

struct NamedArray {
  std::string_view name;
  Array member;
  Indexing indexing;
};

constexpr std::array<NamedArray, 11> kArrays{{
    {"idx_mapping", &model::RequestArrays::idx_mapping, Indexing::by_batch_row},
    {"num_accepted", &model::RequestArrays::num_accepted, Indexing::by_slot},
    {"state_idx", &model::RequestArrays::state_idx, Indexing::by_slot},
    {"num_scheduled", &model::RequestArrays::num_scheduled, Indexing::by_slot},
    {"num_computed", &model::RequestArrays::num_computed, Indexing::by_slot},
    {"num_draft", &model::RequestArrays::num_draft, Indexing::by_slot},
    {"new_num_computed", &model::RequestArrays::new_num_computed, Indexing::by_slot},
    {"query_start_loc", &model::RequestArrays::query_start_loc, Indexing::by_row_boundary},
    {"src_col", &model::RequestArrays::src_col, Indexing::by_slot},
    {"token_bias", &model::RequestArrays::token_bias, Indexing::by_slot},
    {"num_accepted_out", &model::RequestArrays::num_accepted_out, Indexing::by_slot},
}};

// "slot 5, batch row 2" / "slot 5, not in the batch" / "batch row 2"
std::string entry_context(const model::LaunchCase& launch, Indexing indexing, std::int32_t i) {
  if (indexing == Indexing::by_batch_row) return fmt::format("batch row {}", i);
  if (indexing == Indexing::by_row_boundary) return fmt::format("start of batch row {}", i);
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
  for (const NamedArray& a : kArrays) {
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
