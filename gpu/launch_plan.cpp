#include "gpu/launch_plan.h"

#include "gpu/kernels/batch_copy.cuh"
#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/metadata.h"

namespace mc::gpu {

KernelKind to_kernel_kind(model::LaunchKind kind) {
  const model::LaunchKindInfo& info = model::launch_kind_info(kind);
  MC_ASSERT(info.work == model::LaunchWork::batch_rows && "a copy plan has no fused kernel");
  switch (info.family) {
  case model::LaunchFamily::postprocess:
    return KernelKind::postprocess;
  case model::LaunchFamily::postprocess_align:
    return KernelKind::postprocess_align;
  case model::LaunchFamily::precopy:
    return KernelKind::precopy;
  case model::LaunchFamily::preprocess_align:
    return KernelKind::preprocess_align;
  }
  MC_ASSERT(false);
  return KernelKind::postprocess;
}

bool runs_copy_plan(model::LaunchKind kind) {
  return model::launch_kind_info(kind).work == model::LaunchWork::copy_plan;
}

namespace {

TensorDesc describe(const model::StateMeta& m, const model::StateTensor& t) {
  TensorDesc d;
  d.base_addr = m.base_addr;
  d.block_stride_bytes = m.block_stride_bytes;
  d.elem_size = m.elem_size;
  d.group = m.group_index;
  d.conv_width = m.conv_width;
  if (m.conv_width == 0) {
    d.kind = TensorKind::temporal;
    d.natural_bytes = m.inner_size * m.elem_size; // natural size, never the page stride
  } else if (m.ds_row_count == 0) {
    d.kind = TensorKind::conv_sd;
    d.token_row_bytes = m.inner_size * m.elem_size;
    d.natural_bytes = d.token_row_bytes * m.conv_width;
  } else {
    d.kind = TensorKind::conv_ds;
    d.ds_row_count = m.ds_row_count;
    d.ds_row_stride_bytes = m.ds_row_stride_bytes;
    d.natural_bytes = static_cast<std::int64_t>(m.ds_row_count) * m.conv_width * m.elem_size;
  }
  MC_ASSERT(d.natural_bytes == t.natural_bytes);
  d.num_units = static_cast<std::int32_t>(flat_copy_units(d.natural_bytes));
  return d;
}

} // namespace

std::vector<TensorDesc> make_tensor_descs(const model::Layout& layout,
                                          std::span<const std::uint64_t> arena_base_addrs) {
  const std::vector<model::StateMeta> metas = model::flatten_metadata(layout, arena_base_addrs);
  std::vector<TensorDesc> out;
  out.reserve(metas.size());
  for (std::size_t i = 0; i < metas.size(); ++i)
    out.push_back(describe(metas[i], layout.tensors[i]));
  return out;
}

std::vector<UnitRef> make_units(std::span<const TensorDesc> tensors) {
  std::vector<UnitRef> units;
  for (std::size_t t = 0; t < tensors.size(); ++t)
    for (std::int32_t c = 0; c < tensors[t].num_units; ++c)
      units.push_back({.tensor = static_cast<std::int32_t>(t), .chunk = c});
  return units;
}

FusedParams make_fused_params(const model::LaunchCase& launch, std::span<const TensorDesc> tensors,
                              std::span<const UnitRef> units) {
  const model::Layout& layout = launch.layout;
  FusedParams p;
  p.num_reqs = launch.num_reqs;
  p.num_slots = launch.num_slots;
  p.slot_from_idx_mapping = model::uses_idx_mapping(launch.kind);
  p.tables_by_slot = model::tables_by_slot(launch.kind);
  p.block_size = layout.config.mamba_block_size;
  p.num_groups = layout.num_groups();
  p.num_tensors = static_cast<std::int32_t>(tensors.size());
  p.num_units = static_cast<std::int32_t>(units.size());
  p.num_segments = (launch.num_reqs + kSegmentRows - 1) / kSegmentRows;
  MC_ASSERT(p.num_groups <= kGroupsMaxDevice && p.num_segments <= kSegmentsMax);
  for (const TensorDesc& t : tensors)
    (t.kind == TensorKind::temporal ? p.groups_with_temporal : p.groups_with_conv) |= 1u << t.group;
  if (!launch.block_tables.groups.empty())
    p.block_table_row_stride = launch.block_tables.groups.front().row_stride;
  p.tensors = tensors.data();
  p.units = units.data();
  return p;
}

model::RequestArrays prepare_request_arrays(const model::LaunchCase& launch) {
  model::RequestArrays arrays = launch.requests;
  const auto slots = static_cast<std::size_t>(launch.num_slots);
  const model::LaunchFamily family = model::launch_kind_info(launch.kind).family;
  if (family == model::LaunchFamily::postprocess) arrays.num_accepted_out = arrays.num_accepted;
  if (family == model::LaunchFamily::preprocess_align) {
    if (arrays.src_col.empty()) arrays.src_col.assign(slots, 0);
    if (arrays.token_bias.empty()) arrays.token_bias.assign(slots, 0);
  }
  return arrays;
}

RequestPointers host_request_pointers(model::RequestArrays& arrays) {
  RequestPointers out;
  for (std::size_t i = 0; i < model::kRequestArrays.size(); ++i) {
    std::vector<std::int32_t>& v = arrays.*model::kRequestArrays[i].member;
    if (!v.empty()) out.*kRequestPointerFields[i] = v.data();
  }
  return out;
}

std::vector<model::CopyDecision> compact_decisions(std::span<const DecisionRecord> records,
                                                   const model::Layout& layout) {
  std::vector<model::CopyDecision> out;
  for (const DecisionRecord& r : records) {
    if (r.valid == 0) continue;
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(r.tensor)];
    out.push_back({.batch_row = r.batch_row,
                   .slot = r.slot,
                   .tensor = r.tensor,
                   .group = t.group,
                   .layer = t.layer,
                   .state = t.state,
                   .src_col = r.src_col,
                   .dst_col = r.dst_col,
                   .token_bias = r.token_bias,
                   .src_block_id = r.src_block_id,
                   .dst_block_id = r.dst_block_id,
                   .src_byte_offset = r.src_byte_offset,
                   .bytes = r.bytes});
  }
  return out; // records sit at batch_row * num_tensors + tensor: already sorted
}

int fused_program_count(const FusedParams& params, std::int64_t programs_max) {
  if (params.num_reqs == 0) return 0;
  const std::int64_t work = static_cast<std::int64_t>(params.num_reqs) * params.num_units;
  const std::int64_t copiers = std::min(programs_max, work);
  return static_cast<int>(std::max<std::int64_t>(params.num_segments, copiers));
}

} // namespace mc::gpu
