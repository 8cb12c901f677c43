#include "model/launch_kinds.h"

#include "model/errors.h"

#include <string>
#include <vector>

namespace mc::model {
namespace {

void validate_counts(const LaunchCase& c) {
  if (c.num_reqs < 0 || c.num_slots < 0)
    fail_input("launch {}: num_reqs {} and num_slots {} must not be negative", to_string(c.kind),
               c.num_reqs, c.num_slots);
}

void validate_arenas(const LaunchCase& c) {
  if (c.arenas.size() != c.layout.arenas.size())
    fail_input("launch {}: {} arenas given, the layout has {}", to_string(c.kind), c.arenas.size(),
               c.layout.arenas.size());
  for (std::size_t i = 0; i < c.arenas.size(); ++i)
    if (c.arenas[i].size_bytes() != c.layout.arenas[i].size_bytes())
      fail_input("launch {}: arena {} holds {} bytes, the layout needs {}", to_string(c.kind), i,
                 c.arenas[i].size_bytes(), c.layout.arenas[i].size_bytes());
}

void validate_block_tables(const LaunchCase& c) {
  const auto& groups = c.block_tables.groups;
  if (groups.size() != static_cast<std::size_t>(c.layout.num_groups()))
    fail_input("launch {}: {} block tables given, the layout has {} groups", to_string(c.kind),
               groups.size(), c.layout.num_groups());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const BlockTable& table = groups[g];
    if (table.row_width < 0 || table.row_stride < table.row_width || table.num_rows < 0)
      fail_input("launch {}: block table of group {}: row width {} and stride {} (stride must "
                 "be >= width >= 0)",
                 to_string(c.kind), g, table.row_width, table.row_stride);
    if (table.block_ids.size() !=
        static_cast<std::size_t>(table.num_rows) * static_cast<std::size_t>(table.row_stride))
      fail_input("launch {}: block table of group {} holds {} ids, expected rows {} x stride {}",
                 to_string(c.kind), g, table.block_ids.size(), table.num_rows, table.row_stride);
    if (table.num_rows < c.num_reqs)
      fail_input("launch {}: block table of group {} has {} rows for {} request rows",
                 to_string(c.kind), g, table.num_rows, c.num_reqs);
    // Per-slot tables have a row for every slot, as the runner's persistent tables have one
    // for every request it can hold.
    if (launch_kind_info(c.kind).tables_by_slot && table.num_rows < c.num_slots)
      fail_input("launch {}: block table of group {} has {} rows for {} slots (its rows are "
                 "found by slot)",
                 to_string(c.kind), g, table.num_rows, c.num_slots);
    // The kernels get one row stride for every group (the seed asserts it).
    if (table.row_stride != groups[0].row_stride || table.row_width != groups[0].row_width)
      fail_input("launch {}: block table of group {} has width {} stride {}, group 0 has width "
                 "{} stride {} (all groups share them)",
                 to_string(c.kind), g, table.row_width, table.row_stride, groups[0].row_width,
                 groups[0].row_stride);
  }
}

void expect_length(const LaunchCase& c, std::string_view name,
                   const std::vector<std::int32_t>& array, std::int64_t length) {
  if (static_cast<std::int64_t>(array.size()) != length)
    fail_input("launch {}: array {} has {} entries, expected {}", to_string(c.kind), name,
               array.size(), length);
}

void validate_idx_mapping(const LaunchCase& c) {
  const auto& mapping = c.requests.idx_mapping;
  if (!launch_kind_info(c.kind).by_slot) {
    if (c.num_slots != c.num_reqs)
      fail_input("launch {}: num_slots {} must equal num_reqs {} (V1 indexes by row)",
                 to_string(c.kind), c.num_slots, c.num_reqs);
    expect_length(c, "idx_mapping", mapping, 0);
    return;
  }
  expect_length(c, "idx_mapping", mapping, c.num_reqs);
  // The row that took each slot first (-1: none yet); num_slots entries, as the arrays have.
  std::vector<std::int32_t> row_of_slot;
  for (std::int32_t b = 0; b < c.num_reqs; ++b) {
    const std::int32_t slot = mapping[static_cast<std::size_t>(b)];
    if (slot < -1 || slot >= c.num_slots)
      fail_launch_input({"idx_mapping"},
                        "launch {}: request row {}: idx_mapping slot {} is outside [-1, {})",
                        to_string(c.kind), b, slot, c.num_slots);
    if (slot < 0) continue;
    if (row_of_slot.empty()) row_of_slot.assign(static_cast<std::size_t>(c.num_slots), -1);
    std::int32_t& first = row_of_slot[static_cast<std::size_t>(slot)];
    if (first >= 0)
      fail_launch_input({"idx_mapping"},
                        "launch {}: request rows {} and {} both map to slot {} in idx_mapping",
                        to_string(c.kind), first, b, slot);
    first = b;
  }
}

// idx_mapping is checked with the slots it names (validate_idx_mapping).
static_assert(kRequestArrays[0].name == "idx_mapping");
void validate_request_arrays(const LaunchCase& c) {
  const LaunchKindInfo& info = launch_kind_info(c.kind);
  for (std::size_t i = 1; i < kRequestArrays.size(); ++i) {
    const RequestArrayField& field = kRequestArrays[i];
    const std::vector<std::int32_t>& array = c.requests.*field.member;
    const ArrayUse use = info.arrays[i];
    if (use == ArrayUse::unused || (use == ArrayUse::written_or_empty && array.empty())) continue;
    expect_length(c, field.name, array, array_length(field.indexing, c.num_reqs, c.num_slots));
  }
}

} // namespace

std::string block_table_array_name(std::size_t group) {
  return fmt::format("block_table_{}", group);
}

std::string_view to_string(LaunchFamily family) {
  switch (family) {
  case LaunchFamily::postprocess:
    return "postprocess";
  case LaunchFamily::postprocess_align:
    return "postprocess_align";
  case LaunchFamily::precopy:
    return "precopy";
  case LaunchFamily::preprocess_align:
    return "preprocess_align";
  }
  MC_ASSERT(false);
  return {};
}

std::string_view to_string(LaunchPhase phase) {
  return phase == LaunchPhase::pre_step ? "pre_step" : "post_step";
}

std::string_view to_string(LaunchWork work) {
  return work == LaunchWork::batch_rows ? "batch_rows" : "copy_plan";
}

const LaunchKindInfo& launch_kind_info(LaunchKind kind) {
  for (const LaunchKindInfo& info : kLaunchKinds)
    if (info.kind == kind) return info;
  MC_ASSERT(false);
  return kLaunchKinds[0];
}

void validate_launch_arrays(const LaunchCase& c) {
  validate_counts(c);
  validate_block_tables(c);
  validate_idx_mapping(c);
  validate_request_arrays(c);
}

void validate_launch_shape(const LaunchCase& c) {
  validate_counts(c);
  validate_arenas(c);
  validate_launch_arrays(c);
}

} // namespace mc::model
