// validate_case (validate.h): the structural checks made before any decision.
#include "oracle/validate.h"

#include "model/errors.h"
#include "oracle/copy_plan.h"
#include "oracle/describe.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mc::oracle {
namespace {

using model::fail_input;

void validate_arenas(const model::LaunchCase& c) {
  if (c.arenas.size() != c.layout.arenas.size())
    fail_input("launch {}: {} arenas given, the layout has {}", model::to_string(c.kind),
               c.arenas.size(), c.layout.arenas.size());
  for (std::size_t i = 0; i < c.arenas.size(); ++i)
    if (c.arenas[i].size_bytes() != c.layout.arenas[i].size_bytes())
      fail_input("launch {}: arena {} holds {} bytes, the layout needs {}",
                 model::to_string(c.kind), i, c.arenas[i].size_bytes(),
                 c.layout.arenas[i].size_bytes());
}

void validate_block_tables(const model::LaunchCase& c) {
  const auto& groups = c.block_tables.groups;
  if (groups.size() != static_cast<std::size_t>(c.layout.num_groups()))
    fail_input("launch {}: {} block tables given, the layout has {} groups",
               model::to_string(c.kind), groups.size(), c.layout.num_groups());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const model::BlockTable& table = groups[g];
    if (table.row_width < 0 || table.row_stride < table.row_width || table.num_rows < 0)
      fail_input("launch {}: block table of group {}: row width {} and stride {} (stride must "
                 "be >= width >= 0)",
                 model::to_string(c.kind), g, table.row_width, table.row_stride);
    if (table.block_ids.size() !=
        static_cast<std::size_t>(table.num_rows) * static_cast<std::size_t>(table.row_stride))
      fail_input("launch {}: block table of group {} holds {} ids, expected rows {} x stride {}",
                 model::to_string(c.kind), g, table.block_ids.size(), table.num_rows,
                 table.row_stride);
    if (table.num_rows < c.num_reqs)
      fail_input("launch {}: block table of group {} has {} rows for {} request rows",
                 model::to_string(c.kind), g, table.num_rows, c.num_reqs);
    // The kernels get one row stride for every group (the seed asserts it).
    if (table.row_stride != groups[0].row_stride || table.row_width != groups[0].row_width)
      fail_input("launch {}: block table of group {} has width {} stride {}, group 0 has width "
                 "{} stride {} (all groups share them)",
                 model::to_string(c.kind), g, table.row_width, table.row_stride,
                 groups[0].row_width, groups[0].row_stride);
  }
}

void expect_length(const model::LaunchCase& c, std::string_view name,
                   const std::vector<std::int32_t>& array, std::int64_t length) {
  if (static_cast<std::int64_t>(array.size()) != length)
    fail_input("launch {}: array {} has {} entries, expected {}", model::to_string(c.kind), name,
               array.size(), length);
}

void validate_idx_mapping(const model::LaunchCase& c) {
  const auto& mapping = c.requests.idx_mapping;
  if (!model::uses_idx_mapping(c.kind)) {
    if (c.num_slots != c.num_reqs)
      fail_input("launch {}: num_slots {} must equal num_reqs {} (V1 indexes by row)",
                 model::to_string(c.kind), c.num_slots, c.num_reqs);
    expect_length(c, "idx_mapping", mapping, 0);
    return;
  }
  expect_length(c, "idx_mapping", mapping, c.num_reqs);
  // The row that took each slot first (-1: none yet); num_slots entries, as the arrays have.
  std::vector<std::int32_t> row_of_slot;
  for (std::int32_t b = 0; b < c.num_reqs; ++b) {
    const std::int32_t slot = mapping[static_cast<std::size_t>(b)];
    if (slot < -1 || slot >= c.num_slots)
      fail_input("launch {}: request row {}: idx_mapping slot {} is outside [-1, {})",
                 model::to_string(c.kind), b, slot, c.num_slots);
    if (slot < 0) continue;
    if (row_of_slot.empty()) row_of_slot.assign(static_cast<std::size_t>(c.num_slots), -1);
    std::int32_t& first = row_of_slot[static_cast<std::size_t>(slot)];
    if (first >= 0)
      fail_input("launch {}: request rows {} and {} both map to slot {} in idx_mapping",
                 model::to_string(c.kind), first, b, slot);
    first = b;
  }
}

void validate_request_arrays(const model::LaunchCase& c) {
  const model::RequestArrays& r = c.requests;
  const std::int64_t n = c.num_slots;
  switch (c.kind) {
  case model::LaunchKind::postprocess:
    expect_length(c, "num_accepted", r.num_accepted, n);
    expect_length(c, "state_idx", r.state_idx, n);
    expect_length(c, "num_scheduled", r.num_scheduled, n);
    expect_length(c, "num_computed", r.num_computed, n);
    expect_length(c, "num_draft", r.num_draft, n);
    // The launcher initialises the output from num_accepted; an empty one is filled in.
    if (!r.num_accepted_out.empty()) expect_length(c, "num_accepted_out", r.num_accepted_out, n);
    return;
  case model::LaunchKind::postprocess_align:
    expect_length(c, "num_accepted", r.num_accepted, n);
    expect_length(c, "state_idx", r.state_idx, n);
    expect_length(c, "new_num_computed", r.new_num_computed, n);
    return;
  case model::LaunchKind::precopy:
  case model::LaunchKind::batch_copy:
    expect_length(c, "state_idx", r.state_idx, n);
    expect_length(c, "src_col", r.src_col, n);
    expect_length(c, "token_bias", r.token_bias, n);
    return;
  case model::LaunchKind::preprocess_align:
    expect_length(c, "state_idx", r.state_idx, n);
    expect_length(c, "num_computed", r.num_computed, n);
    expect_length(c, "num_accepted", r.num_accepted, n);
    expect_length(c, "query_start_loc", r.query_start_loc, std::int64_t{c.num_reqs} + 1);
    // Outputs per slot; slots outside the batch keep their values, so they must exist.
    expect_length(c, "src_col", r.src_col, n);
    expect_length(c, "token_bias", r.token_bias, n);
    return;
  }
  MC_ASSERT(false);
}

} // namespace

void validate_case(const model::LaunchCase& launch_case) {
  if (launch_case.num_reqs < 0 || launch_case.num_slots < 0)
    fail_input("launch {}: num_reqs {} and num_slots {} must not be negative",
               model::to_string(launch_case.kind), launch_case.num_reqs, launch_case.num_slots);
  validate_arenas(launch_case);
  validate_block_tables(launch_case);
  validate_idx_mapping(launch_case);
  validate_request_arrays(launch_case);
}

} // namespace mc::oracle
