// Decisions: matched by (batch row, tensor) in the contract's order, the first missing,
// extra or different copy named by row, slot, group, layer, state and what moved.
#include "fuzz/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace mc::fuzz::detail {
namespace {

using Key = std::pair<std::int32_t, std::int32_t>; // (batch row, tensor)
Key key_of(const model::CopyDecision& d) {
  return {d.batch_row, d.tensor};
}

// "batch row 3 (slot 5), group 0 layer 2 state conv"
std::string where(const model::LaunchCase& launch, const model::CopyDecision& d) {
  const auto& tensors = launch.layout.tensors;
  if (d.tensor < 0 || static_cast<std::size_t>(d.tensor) >= tensors.size())
    return fmt::format("batch row {} (slot {}), tensor {} (out of range: the layout has {})",
                       d.batch_row, d.slot, d.tensor, tensors.size());
  const model::StateTensor& t = tensors[static_cast<std::size_t>(d.tensor)];
  return fmt::format("batch row {} (slot {}), group {} layer {} state {}", d.batch_row, d.slot,
                     t.group, t.layer, t.shape.name);
}

std::string columns(const model::CopyDecision& d) {
  return fmt::format("column {} -> {} with bias {}", d.src_col, d.dst_col, d.token_bias);
}

std::string full(const model::CopyDecision& d) {
  return fmt::format("{} (block {} -> {}, src offset {}, {} bytes)", columns(d), d.src_block_id,
                     d.dst_block_id, d.src_byte_offset, d.bytes);
}

// The names of the fields in which two decisions of one (row, tensor) differ.
std::vector<std::string> differing_fields(const model::CopyDecision& e,
                                          const model::CopyDecision& a) {
  std::vector<std::string> f;
  const auto check = [&](bool differs, const char* name) {
    if (differs) f.emplace_back(name);
  };
  check(e.slot != a.slot, "slot");
  check(e.group != a.group, "group");
  check(e.layer != a.layer, "layer");
  check(e.state != a.state, "state");
  check(e.src_col != a.src_col, "src_col");
  check(e.dst_col != a.dst_col, "dst_col");
  check(e.token_bias != a.token_bias, "token_bias");
  check(e.src_block_id != a.src_block_id, "src_block_id");
  check(e.dst_block_id != a.dst_block_id, "dst_block_id");
  check(e.src_byte_offset != a.src_byte_offset, "src_byte_offset");
  check(e.bytes != a.bytes, "bytes");
  return f;
}

Difference decision_difference(const model::CopyDecision& at, std::string message) {
  return Difference{.category = DifferenceCategory::decisions,
                    .message = std::move(message),
                    .batch_row = at.batch_row,
                    .tensor = at.tensor};
}

std::optional<Difference> out_of_order(const std::vector<model::CopyDecision>& ds,
                                       std::string_view side) {
  for (std::size_t i = 1; i < ds.size(); ++i)
    if (!(key_of(ds[i - 1]) < key_of(ds[i])))
      return decision_difference(
          ds[i], fmt::format("{} decisions are not strictly sorted by (batch row, tensor): entry "
                             "{} (batch row {}, tensor {}) follows (batch row {}, tensor {})",
                             side, i, ds[i].batch_row, ds[i].tensor, ds[i - 1].batch_row,
                             ds[i - 1].tensor));
  return std::nullopt;
}

// "copied column 2 -> 1 with bias 1; expected column 2 -> 1 with bias 2", and where
// more than the columns and bias differ, every differing field and both full records.
Difference different(const model::LaunchCase& launch, const model::CopyDecision& e,
                     const model::CopyDecision& a) {
  std::string message =
      fmt::format("{}: copied {}; expected {}", where(launch, e), columns(a), columns(e));
  const std::vector<std::string> fields = differing_fields(e, a);
  const bool beyond_columns = std::any_of(fields.begin(), fields.end(), [](const std::string& f) {
    return f != "src_col" && f != "dst_col" && f != "token_bias";
  });
  if (beyond_columns)
    message += fmt::format(" (differs in: {}; actual {}; expected {})", fmt::join(fields, ", "),
                           full(a), full(e));
  return decision_difference(e, std::move(message));
}

} // namespace

std::optional<Difference> compare_decisions(const model::LaunchCase& launch,
                                            const model::LaunchResult& expected,
                                            const model::LaunchResult& actual) {
  if (auto d = out_of_order(expected.decisions, "expected")) return d;
  if (auto d = out_of_order(actual.decisions, "actual")) return d;
  const auto& E = expected.decisions;
  const auto& A = actual.decisions;
  std::size_t i = 0, j = 0;
  while (i < E.size() || j < A.size()) {
    if (j == A.size() || (i < E.size() && key_of(E[i]) < key_of(A[j])))
      return decision_difference(
          E[i], fmt::format("{}: no copy was made; expected {}", where(launch, E[i]), full(E[i])));
    if (i == E.size() || key_of(A[j]) < key_of(E[i]))
      return decision_difference(
          A[j], fmt::format("{}: copied {}; expected no copy", where(launch, A[j]), full(A[j])));
    if (E[i] != A[j]) return different(launch, E[i], A[j]);
    ++i;
    ++j;
  }
  return std::nullopt;
}

} // namespace mc::fuzz::detail
