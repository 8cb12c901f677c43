// Names of the runner options and the deferred gather order (runner_options.h).
#include "model/runner_options.h"

#include "model/errors.h"

namespace mc::model {

std::string_view to_string(V1CopyPath path) {
  switch (path) {
  case V1CopyPath::batch_copy:
    return "batch_copy";
  case V1CopyPath::precopy:
    return "precopy";
  case V1CopyPath::precopy_v1:
    return "precopy_v1";
  }
  MC_ASSERT(false);
  return "?";
}

std::optional<V1CopyPath> parse_v1_copy_path(std::string_view text) {
  for (const V1CopyPath p : {V1CopyPath::batch_copy, V1CopyPath::precopy, V1CopyPath::precopy_v1})
    if (to_string(p) == text) return p;
  return std::nullopt;
}

std::string_view to_string(V2TableRows rows) {
  return rows == V2TableRows::slot ? "slot" : "batch_row";
}

std::optional<V2TableRows> parse_v2_table_rows(std::string_view text) {
  if (text == "batch_row") return V2TableRows::batch_row;
  if (text == "slot") return V2TableRows::slot;
  return std::nullopt;
}

std::vector<std::int32_t> deferred_gather_order(std::int32_t num_rows) {
  MC_ASSERT(num_rows >= 0);
  std::vector<std::int32_t> order(static_cast<std::size_t>(num_rows));
  for (std::int32_t b = 0; b < num_rows; ++b)
    order[static_cast<std::size_t>(b)] = (b + 1) % num_rows;
  return order;
}

std::vector<LaunchKind> runner_launch_kinds(const RunnerOptions& options, CacheMode mode) {
  if (mode == CacheMode::all) return {};
  if (options.flavour == RunnerFlavour::v1) {
    const LaunchKind copy = options.v1_copy_path == V1CopyPath::batch_copy ? LaunchKind::batch_copy
                            : options.v1_copy_path == V1CopyPath::precopy_v1
                                ? LaunchKind::precopy_v1
                                : LaunchKind::precopy;
    return {copy, LaunchKind::postprocess};
  }
  const bool slot = options.v2_table_rows == V2TableRows::slot;
  return {LaunchKind::preprocess_align,
          slot ? LaunchKind::precopy_slot_tables : LaunchKind::precopy,
          slot ? LaunchKind::postprocess_align_slot_tables : LaunchKind::postprocess_align};
}

} // namespace mc::model
