#include "oracle/engine/finding.h"

#include <fmt/format.h>

#include <iterator>

namespace mc::oracle::engine {

std::string_view to_string(FindingKind kind) {
  // In the order of the enum.
  static constexpr std::string_view kNames[] = {"wrong_read",
                                                "wrong_copy_source",
                                                "wrong_next_state",
                                                "wrong_cached_state",
                                                "bad_write",
                                                "bad_read",
                                                "bad_index",
                                                "launch_rejected",
                                                "unsupported_copy",
                                                "token_mismatch",
                                                "inconsistent_step",
                                                "wrong_prefix_hit",
                                                "spec_blocks_not_moved",
                                                "excess_retention",
                                                "internal_assertion",
                                                "in_flight_block_reused",
                                                "in_flight_write_conflict",
                                                "block_manager_fault",
                                                "block_accounting"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(FindingKind::block_accounting) + 1);
  const auto i = static_cast<std::size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "?";
}

Finding make_finding(const model::Layout& layout, FindingKind kind, std::int64_t step,
                     std::string req_id, std::int32_t tensor, std::int32_t col,
                     std::int32_t block_id, std::string detail, std::string expected) {
  Finding f{.kind = kind,
            .step = step,
            .req_id = std::move(req_id),
            .tensor = tensor,
            .col = col,
            .block_id = block_id,
            .detail = std::move(detail),
            .expected = std::move(expected)};
  std::string where = fmt::format("step {}", step);
  if (!f.req_id.empty()) where += fmt::format(", request {}", f.req_id);
  if (tensor >= 0) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
    f.group = t.group;
    f.layer = t.layer;
    f.state = t.state;
    where +=
        fmt::format(", group {} layer {} state {} ({})", t.group, t.layer, t.state, t.shape.name);
  }
  if (col >= 0) where += fmt::format(", column {}", col);
  if (block_id != -1) where += fmt::format(", block {}", block_id);
  f.message = fmt::format("{}: {}: {}", to_string(kind), where, f.detail);
  if (!f.expected.empty()) f.message += fmt::format("; expected {}", f.expected);
  return f;
}

Finding internal_assertion(const model::Layout& layout, std::int64_t step,
                           const model::AssertionFailure& failure) {
  return make_finding(layout, FindingKind::internal_assertion, step, "", -1, -1, -1,
                      fmt::format("an assumption of the engine model failed: {}", failure.what()),
                      "every assertion of the scheduler, block manager and runner to hold");
}

} // namespace mc::oracle::engine
