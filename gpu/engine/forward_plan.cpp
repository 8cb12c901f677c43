// Host-side preparation of the forward kernel: tensor descriptors from model/ metadata and
// the layout-level fields of ForwardParams. Shared by the host and cuda executors.
#include "gpu/engine/executor.h"
#include "model/block_table.h"
#include "model/conv_history.h"
#include "model/errors.h"

namespace mc::gpu::engine {

std::vector<ForwardTensor> make_forward_tensors(const model::Layout& layout,
                                                const std::vector<std::uint64_t>& arena_addrs) {
  std::vector<ForwardTensor> out;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const model::StateTensor& t = layout.tensors[i];
    const bool temporal = t.kind() == model::StateKind::temporal;
    ForwardTensor f{.base_addr = arena_addrs[static_cast<std::size_t>(t.arena)] +
                                 static_cast<std::uint64_t>(t.offset_bytes),
                    .block_stride_bytes = t.block_stride_bytes,
                    .natural_bytes = t.natural_bytes,
                    .elem_size = t.elem_size,
                    .group = t.group,
                    .conv_ds = t.conv_layout == model::ConvLayout::DS ? 1 : 0,
                    .is_temporal = temporal ? 1 : 0};
    if (!temporal) {
      f.conv_dim = t.shape.conv_dim;
      f.conv_width = static_cast<std::int32_t>(t.shape.conv_state_len);
      f.history_rows =
          static_cast<std::int32_t>(model::conv_history_rows(layout, static_cast<std::int32_t>(i)));
      MC_ASSERT(f.conv_dim * f.conv_width * f.elem_size == t.natural_bytes);
    }
    out.push_back(f);
  }
  return out;
}

ForwardParams make_forward_params(const model::Layout& layout, const model::BlockTables& tables,
                                  std::int32_t num_ops) {
  MC_ASSERT(!tables.groups.empty());
  MC_ASSERT(static_cast<int>(tables.groups.size()) <= kForwardGroupsMax);
  return ForwardParams{.num_tensors = static_cast<std::int32_t>(layout.tensors.size()),
                       .num_ops = num_ops,
                       .row_width = tables.groups[0].row_width,
                       .row_stride = tables.groups[0].row_stride,
                       .num_blocks = layout.spec.num_blocks};
}

ForwardParams make_graph_params(const model::Layout& layout, const GraphShape& shape) {
  MC_ASSERT(layout.num_groups() <= kForwardGroupsMax);
  return ForwardParams{.num_tensors = static_cast<std::int32_t>(layout.tensors.size()),
                       .num_ops = shape.batch_size * shape.ops_per_row,
                       .num_reads = shape.batch_size,
                       .row_width = shape.width,
                       .row_stride = shape.width,
                       .num_blocks = layout.spec.num_blocks,
                       .null_block_id = model::kNullBlockId};
}

void check_graph_inputs(const GraphInputs& in, std::size_t num_groups) {
  const GraphShape& s = in.shape;
  const auto rows = static_cast<std::size_t>(s.batch_size);
  MC_ASSERT(s.batch_size > 0 && s.width > 0 && s.ops_per_row > 0 && s.tokens_per_row > 0);
  MC_ASSERT(in.state_indices.size() == num_groups);
  for (const std::vector<std::int32_t>& ids : in.state_indices)
    MC_ASSERT(ids.size() == rows * static_cast<std::size_t>(s.width));
  MC_ASSERT(in.ops.size() == rows * static_cast<std::size_t>(s.ops_per_row));
  MC_ASSERT(in.reads.size() == rows);
  MC_ASSERT(in.tokens.size() == rows * static_cast<std::size_t>(s.tokens_per_row));
}

} // namespace mc::gpu::engine
