// Checks of the input the kernels assume valid (model/LAUNCH_KINDS.md, "Validity").
#include "gpu/kernels/decide.cuh"
#include "gpu/launch_plan.h"
#include "model/errors.h"

#include <vector>

namespace mc::gpu {
namespace {

using model::fail_input;
using model::LaunchKind;

void require_length(const std::vector<std::int32_t>& v, std::int64_t n, const char* name) {
  if (static_cast<std::int64_t>(v.size()) < n)
    fail_input("launch: array {} has {} entries, needs {}", name, v.size(), n);
}

void validate_arrays(const model::LaunchCase& c) {
  const model::RequestArrays& r = c.requests;
  const std::int64_t slots = c.num_slots;
  switch (c.kind) {
  case LaunchKind::postprocess:
    for (const auto* v :
         {&r.num_accepted, &r.state_idx, &r.num_scheduled, &r.num_computed, &r.num_draft})
      require_length(*v, slots, "of postprocess");
    break;
  case LaunchKind::postprocess_align:
    for (const auto* v : {&r.num_accepted, &r.state_idx, &r.new_num_computed})
      require_length(*v, slots, "of postprocess_align");
    break;
  case LaunchKind::precopy:
  case LaunchKind::batch_copy:
    for (const auto* v : {&r.state_idx, &r.src_col, &r.token_bias})
      require_length(*v, slots, "src_col/state_idx/token_bias");
    break;
  case LaunchKind::preprocess_align:
    for (const auto* v : {&r.state_idx, &r.num_computed, &r.num_accepted})
      require_length(*v, slots, "of preprocess_align");
    require_length(r.query_start_loc, c.num_reqs + 1, "query_start_loc");
    break;
  }
}

void validate_idx_mapping(const model::LaunchCase& c) {
  if (!model::uses_idx_mapping(c.kind)) {
    if (c.num_slots != c.num_reqs)
      fail_input("launch: V1 kind {} needs num_slots == num_reqs, got {} and {}",
                 model::to_string(c.kind), c.num_slots, c.num_reqs);
    return;
  }
  require_length(c.requests.idx_mapping, c.num_reqs, "idx_mapping");
  std::vector<bool> seen(static_cast<std::size_t>(c.num_slots), false);
  for (std::int32_t b = 0; b < c.num_reqs; ++b) {
    const std::int32_t s = c.requests.idx_mapping[static_cast<std::size_t>(b)];
    if (s < -1 || s >= c.num_slots)
      fail_input("launch: idx_mapping[{}] = {} is outside [-1, {})", b, s, c.num_slots);
    if (s < 0) continue;
    if (seen[static_cast<std::size_t>(s)])
      fail_input("launch: idx_mapping[{}] = {} maps a second row to one slot", b, s);
    seen[static_cast<std::size_t>(s)] = true;
  }
}

void validate_tables(const model::LaunchCase& c) {
  const auto& groups = c.block_tables.groups;
  if (groups.size() != static_cast<std::size_t>(c.layout.num_groups()))
    fail_input("launch: {} block tables for {} groups", groups.size(), c.layout.num_groups());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const model::BlockTable& t = groups[g];
    if (t.row_stride != groups.front().row_stride || t.row_width != groups.front().row_width)
      fail_input("launch: block table {} has width/stride {}/{}, group 0 has {}/{}", g, t.row_width,
                 t.row_stride, groups.front().row_width, groups.front().row_stride);
    if (t.num_rows < c.num_reqs)
      fail_input("launch: block table {} has {} rows for {} requests", g, t.num_rows, c.num_reqs);
    if (t.block_ids.size() != static_cast<std::size_t>(t.num_rows) * t.row_stride)
      fail_input("launch: block table {} holds {} ids, expected rows x stride", g,
                 t.block_ids.size());
  }
}

} // namespace

void validate_case(const model::LaunchCase& c) {
  if (c.arenas.size() != c.layout.arenas.size())
    fail_input("launch: {} arenas for a layout of {}", c.arenas.size(), c.layout.arenas.size());
  for (std::size_t i = 0; i < c.arenas.size(); ++i)
    if (c.arenas[i].size_bytes() != c.layout.arenas[i].size_bytes())
      fail_input("launch: arena {} has {} bytes, the layout says {}", i, c.arenas[i].size_bytes(),
                 c.layout.arenas[i].size_bytes());
  validate_case_arrays(c);
}

void validate_case_arrays(const model::LaunchCase& c) {
  if (c.num_reqs < 0 || c.num_reqs > kRowsMax || c.num_slots < 0)
    fail_input("launch: num_reqs {} must be in 0..{} and num_slots {} >= 0", c.num_reqs, kRowsMax,
               c.num_slots);
  validate_arrays(c);
  validate_idx_mapping(c);
  validate_tables(c);
}

namespace {

RowDecision decide_any(KernelKind kind, const FusedParams& p, std::int32_t b) {
  switch (kind) {
  case KernelKind::postprocess:
    return decide_row<KernelKind::postprocess, Clean>(p, b);
  case KernelKind::postprocess_align:
    return decide_row<KernelKind::postprocess_align, Clean>(p, b);
  case KernelKind::precopy:
    return decide_row<KernelKind::precopy, Clean>(p, b);
  case KernelKind::preprocess_align:
    break;
  }
  return RowDecision{};
}

void check_column(const model::LaunchCase& c, std::int32_t b, std::int32_t group, std::int64_t col,
                  const char* role) {
  const model::BlockTable& t = c.block_tables.groups[static_cast<std::size_t>(group)];
  if (col < 0 || col >= t.row_width)
    fail_input("launch: request {} group {}: {} column {} is outside the row [0, {})", b, group,
               role, col, t.row_width);
  const std::int32_t block = t.at(b, static_cast<std::int32_t>(col));
  if (block < 0 || block >= c.layout.spec.num_blocks)
    fail_input("launch: request {} group {}: {} column {} holds block {}, not in [0, {})", b, group,
               role, col, block, c.layout.spec.num_blocks);
}

} // namespace

void validate_fused_copies(const model::LaunchCase& c) {
  if (c.kind == LaunchKind::preprocess_align || c.kind == LaunchKind::batch_copy) return;
  model::RequestArrays arrays = prepare_request_arrays(c);
  std::vector<TensorDesc> tensors =
      make_tensor_descs(c.layout, std::vector<std::uint64_t>(c.layout.arenas.size(), 0));
  FusedParams p = make_fused_params(c, tensors, {});
  p.requests = host_request_pointers(arrays);
  const KernelKind kind = to_kernel_kind(c.kind);
  for (std::int32_t b = 0; b < c.num_reqs; ++b) {
    const RowDecision d = decide_any(kind, p, b);
    if (!d.copy) continue;
    if (d.bias < 0) fail_input("launch: request {} has token_bias {} < 0", b, d.bias);
    for (std::int32_t g = 0; g < p.num_groups; ++g) {
      check_column(c, b, g, d.dst_col, "destination");
      if ((p.groups_with_conv >> g) & 1u) check_column(c, b, g, d.src_col, "conv source");
      if ((p.groups_with_temporal >> g) & 1u)
        check_column(c, b, g, std::int64_t{d.src_col} + d.bias, "temporal source");
    }
  }
}

} // namespace mc::gpu
