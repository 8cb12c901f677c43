// Checks of the input the kernels assume valid (model/LAUNCH_KINDS.md, "Validity"): the shape
// of a case as model/launch_kinds.h checks it for everyone, the kernels' own row limit, and
// the columns and blocks each fused copy would touch.
#include "gpu/kernels/decide.cuh"
#include "gpu/launch_plan.h"
#include "model/errors.h"
#include "model/launch.h"
#include "model/launch_kinds.h"

#include <vector>

namespace mc::gpu {
namespace {

using model::fail_input;

// The grid and the active-row segments are sized for at most kRowsMax rows.
void validate_row_count(const model::LaunchCase& c) {
  if (c.num_reqs > kRowsMax)
    fail_input("launch {}: num_reqs {} is more than the kernels take ({})",
               model::to_string(c.kind), c.num_reqs, kRowsMax);
}

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

// Column `col` of request b's table row `row` (b, or its slot with per-slot tables).
void check_column(const model::LaunchCase& c, std::int32_t b, std::int32_t row, std::int32_t group,
                  std::int64_t col, const char* role) {
  const model::BlockTable& t = c.block_tables.groups[static_cast<std::size_t>(group)];
  if (col < 0 || col >= t.row_width)
    fail_input("launch: request {} group {}: {} column {} is outside the row [0, {})", b, group,
               role, col, t.row_width);
  const std::int32_t block = t.at(row, static_cast<std::int32_t>(col));
  if (block < 0 || block >= c.layout.spec.num_blocks)
    fail_input("launch: request {} group {}: {} column {} holds block {}, not in [0, {})", b, group,
               role, col, block, c.layout.spec.num_blocks);
}

} // namespace

void validate_case(const model::LaunchCase& c) {
  model::validate_launch_shape(c);
  validate_row_count(c);
}

void validate_case_arrays(const model::LaunchCase& c) {
  model::validate_launch_arrays(c);
  validate_row_count(c);
}

void validate_fused_copies(const model::LaunchCase& c) {
  const model::LaunchKindInfo& info = model::launch_kind_info(c.kind);
  if (!info.moves_state || info.work == model::LaunchWork::copy_plan) return;
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
    const std::int32_t row = Clean::table_row(p, b, d.slot);
    for (std::int32_t g = 0; g < p.num_groups; ++g) {
      check_column(c, b, row, g, d.dst_col, "destination");
      if ((p.groups_with_conv >> g) & 1u) check_column(c, b, row, g, d.src_col, "conv source");
      if ((p.groups_with_temporal >> g) & 1u)
        check_column(c, b, row, g, std::int64_t{d.src_col} + d.bias, "temporal source");
    }
  }
}

} // namespace mc::gpu
