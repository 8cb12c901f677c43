#include "oracle/engine/finding.h"

#include <fmt/format.h>

namespace mc::oracle::engine {

std::string_view to_string(FindingKind kind) {
  switch (kind) {
  case FindingKind::wrong_read:
    return "wrong_read";
  case FindingKind::wrong_copy_source:
    return "wrong_copy_source";
  case FindingKind::wrong_next_state:
    return "wrong_next_state";
  case FindingKind::wrong_cached_state:
    return "wrong_cached_state";
  case FindingKind::bad_write:
    return "bad_write";
  case FindingKind::bad_read:
    return "bad_read";
  case FindingKind::bad_index:
    return "bad_index";
  case FindingKind::launch_rejected:
    return "launch_rejected";
  case FindingKind::unsupported_copy:
    return "unsupported_copy";
  case FindingKind::token_mismatch:
    return "token_mismatch";
  case FindingKind::inconsistent_step:
    return "inconsistent_step";
  case FindingKind::wrong_prefix_hit:
    return "wrong_prefix_hit";
  case FindingKind::spec_blocks_not_moved:
    return "spec_blocks_not_moved";
  case FindingKind::excess_retention:
    return "excess_retention";
  case FindingKind::block_manager_fault:
    return "block_manager_fault";
  case FindingKind::block_accounting:
    return "block_accounting";
  case FindingKind::internal_assertion:
    return "internal_assertion";
  case FindingKind::in_flight_block_reused:
    return "in_flight_block_reused";
  case FindingKind::in_flight_write_conflict:
    return "in_flight_write_conflict";
  }
  return "?";
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
