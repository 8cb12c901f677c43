#include "model/launch.h"

#include "model/errors.h"
#include "model/launch_kinds.h"

#include <fmt/format.h>

#include <string>

namespace mc::model {

std::string_view to_string(LaunchKind kind) {
  return launch_kind_info(kind).name;
}

LaunchKind parse_launch_kind(std::string_view text) {
  for (const LaunchKind k : kAllLaunchKinds)
    if (to_string(k) == text) return k;
  std::string names;
  for (std::size_t k = 0; k < kLaunchKinds.size(); ++k)
    names += fmt::format("{}{}",
                         k == 0                         ? ""
                         : k + 1 == kLaunchKinds.size() ? " or "
                                                        : ", ",
                         kLaunchKinds[k].name);
  fail_input("launch kind: expected {}, got '{}'", names, text);
}

bool uses_idx_mapping(LaunchKind kind) {
  return launch_kind_info(kind).by_slot;
}

bool tables_by_slot(LaunchKind kind) {
  return launch_kind_info(kind).tables_by_slot;
}

namespace {
std::vector<Arena> clone_arenas(const std::vector<Arena>& arenas) {
  std::vector<Arena> out;
  out.reserve(arenas.size());
  for (const Arena& a : arenas)
    out.push_back(a.clone());
  return out;
}
} // namespace

LaunchCase LaunchCase::clone() const {
  return LaunchCase{.layout = layout,
                    .kind = kind,
                    .num_reqs = num_reqs,
                    .num_slots = num_slots,
                    .block_tables = block_tables,
                    .requests = requests,
                    .arenas = clone_arenas(arenas)};
}

LaunchResult LaunchResult::clone() const {
  return LaunchResult{.status = status,
                      .unsupported_reason = unsupported_reason,
                      .requests = requests,
                      .decisions = decisions,
                      .arenas = clone_arenas(arenas)};
}

} // namespace mc::model
