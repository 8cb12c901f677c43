// V1's flat copy plan (launch kind batch_copy, model/LAUNCH_KINDS.md): per copying request
// and state one (src address, dst address, bytes) triple, as the seed's copy specs give
// them: conv SD state[bt(src), bias:] flat onto the start of state[bt(dst)]; temporal
// state[bt(src + bias)] whole; conv DS only with bias 0 (the whole natural block). A DS
// state with bias > 0 is no flat copy: the launch is unsupported and copies nothing.
#include "gpu/kernels/batch_copy.cuh"
#include "gpu/launch_plan.h"
#include "model/errors.h"

#include <fmt/format.h>

namespace mc::gpu {
namespace {

std::int32_t block_of(const model::LaunchCase& c, std::int32_t group, std::int32_t row,
                      std::int64_t col, const char* role) {
  const model::BlockTable& t = c.block_tables.groups[static_cast<std::size_t>(group)];
  if (col < 0 || col >= t.row_width)
    model::fail_input("batch_copy: request {} group {}: {} column {} is outside [0, {})", row,
                      group, role, col, t.row_width);
  const std::int32_t block = t.at(row, static_cast<std::int32_t>(col));
  if (block < 0 || block >= c.layout.spec.num_blocks)
    model::fail_input("batch_copy: request {} group {}: {} column {} holds block {}", row, group,
                      role, col, block);
  return block;
}

// The copy spec of one state: the decision and its triple (0-byte triples are kept out).
model::CopyDecision copy_spec(const model::LaunchCase& c, const TensorDesc& d, std::int32_t tensor,
                              std::int32_t row, std::int32_t src_col, std::int32_t dst_col,
                              std::int32_t bias, CopyTriple& triple) {
  const model::StateTensor& t = c.layout.tensors[static_cast<std::size_t>(tensor)];
  model::CopyDecision out{.batch_row = row,
                          .slot = row,
                          .tensor = tensor,
                          .group = t.group,
                          .layer = t.layer,
                          .state = t.state,
                          .src_col = src_col,
                          .dst_col = dst_col,
                          .token_bias = bias};
  out.dst_block_id = block_of(c, t.group, row, dst_col, "destination");
  if (d.kind == TensorKind::temporal) {
    out.src_block_id = block_of(c, t.group, row, std::int64_t{src_col} + bias, "temporal source");
    out.bytes = d.natural_bytes;
  } else {
    out.src_block_id = block_of(c, t.group, row, src_col, "conv source");
    const std::int64_t kept = std::max<std::int64_t>(d.conv_width - bias, 0);
    const std::int64_t row_bytes = d.kind == TensorKind::conv_sd
                                       ? d.token_row_bytes
                                       : std::int64_t{d.ds_row_count} * d.elem_size;
    out.src_byte_offset = d.kind == TensorKind::conv_sd ? bias * d.token_row_bytes : 0;
    out.bytes = kept * row_bytes;
  }
  triple.src_addr =
      d.base_addr +
      static_cast<std::uint64_t>(std::int64_t{out.src_block_id} * d.block_stride_bytes) +
      static_cast<std::uint64_t>(out.src_byte_offset);
  triple.dst_addr = d.base_addr + static_cast<std::uint64_t>(std::int64_t{out.dst_block_id} *
                                                             d.block_stride_bytes);
  triple.bytes = out.bytes;
  return out;
}

} // namespace

BatchPlan plan_batch_copy(const model::LaunchCase& c,
                          std::span<const std::uint64_t> arena_base_addrs) {
  MC_ASSERT(runs_copy_plan(c.kind));
  const std::vector<TensorDesc> tensors = make_tensor_descs(c.layout, arena_base_addrs);
  const model::RequestArrays& r = c.requests;
  BatchPlan plan;
  for (std::int32_t row = 0; row < c.num_reqs; ++row) {
    const auto s = static_cast<std::size_t>(row);
    const std::int32_t src_col = r.src_col[s];
    const std::int32_t dst_col = r.state_idx[s];
    const std::int32_t bias = r.token_bias[s];
    if (src_col < 0 || src_col == dst_col) continue; // preprocess_mamba's condition
    if (bias < 0) model::fail_input("batch_copy: request {} has token_bias {} < 0", row, bias);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].kind == TensorKind::conv_ds && bias > 0) {
        const model::StateTensor& st = c.layout.tensors[t];
        return BatchPlan{.unsupported = true,
                         .unsupported_reason = fmt::format(
                             "batch_copy: request {} tensor {} (group {} layer {} state {}): a DS "
                             "conv state with token_bias {} > 0 is no flat copy",
                             row, t, st.group, st.layer, st.state, bias)};
      }
      CopyTriple triple;
      plan.decisions.push_back(copy_spec(c, tensors[t], static_cast<std::int32_t>(t), row, src_col,
                                         dst_col, bias, triple));
      if (triple.bytes == 0) continue;
      triple.first_unit = plan.num_units;
      plan.num_units += flat_copy_units(triple.bytes);
      plan.triples.push_back(triple);
    }
  }
  return plan;
}

} // namespace mc::gpu
