// Host-side preparation of the forward kernel: tensor descriptors from model/ metadata and
// the layout-level fields of ForwardParams. Shared by the host and cuda executors.
#include "gpu/engine/executor.h"
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

} // namespace mc::gpu::engine
