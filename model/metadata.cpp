#include "model/metadata.h"

#include "model/errors.h"

namespace mc::model {

std::vector<StateMeta> flatten_metadata(const Layout& layout,
                                        std::span<const std::uint64_t> arena_base_addrs) {
  MC_ASSERT(arena_base_addrs.size() == layout.arenas.size());
  std::vector<StateMeta> metas;
  metas.reserve(layout.tensors.size());
  for (const StateTensor& t : layout.tensors) {
    StateMeta m{};
    m.base_addr = arena_base_addrs[static_cast<std::size_t>(t.arena)] +
                  static_cast<std::uint64_t>(t.offset_bytes);
    m.block_stride_bytes = t.block_stride_bytes;
    m.elem_size = t.elem_size;
    m.group_index = t.group;
    if (t.kind() == StateKind::temporal) {
      m.inner_size = t.shape.num_elements();
      m.conv_width = 0;
    } else if (t.conv_layout == ConvLayout::SD) {
      m.inner_size = t.shape.conv_dim;
      m.conv_width = static_cast<std::int32_t>(t.shape.conv_state_len);
    } else {
      m.inner_size = 1;
      m.conv_width = static_cast<std::int32_t>(t.shape.conv_state_len);
      m.ds_row_count = static_cast<std::int32_t>(t.shape.conv_dim);
      m.ds_row_stride_bytes = t.shape.conv_state_len * t.elem_size;
    }
    metas.push_back(m);
  }
  return metas;
}

} // namespace mc::model
