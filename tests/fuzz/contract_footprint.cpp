// The contract's footprint and validity rules (see contract_footprint.h).
#include "contract_footprint.h"

#include "model/errors.h"
#include "model/launch_kinds.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace mc::fuzz::testing {
namespace {

using I32 = std::int32_t;
using model::LaunchFamily;

I32 slot_of(const model::LaunchCase& c, I32 b) {
  return c.requests.idx_mapping.empty() ? b : c.requests.idx_mapping[static_cast<std::size_t>(b)];
}

I32 table_row_of(const model::LaunchCase& c, I32 b, I32 s) {
  return model::tables_by_slot(c.kind) ? s : b;
}

// postprocess and postprocess_align share the decision once running/new are known.
void save_decision(Footprint& f, I32 b, I32 s, I32 table_row, std::int64_t running, std::int64_t a,
                   I32 state_idx, I32 block_size) {
  const std::int64_t aligned = model::floor_div(running + a - 1, block_size) * block_size;
  if (aligned < running) {
    ++f.steady_rows;
    return;
  }
  ++f.crossing_rows;
  const auto bias = static_cast<I32>(aligned - running);
  const auto dst = static_cast<I32>(aligned / block_size - 1);
  if (state_idx == dst) ++f.resets;
  if (state_idx == dst && bias == 0) return;
  f.copies.push_back({b, s, table_row, state_idx, dst, bias});
}

bool has_ds_conv(const model::Layout& layout) {
  if (layout.config.conv_layout != model::ConvLayout::DS) return false;
  for (const model::StateTensor& t : layout.tensors)
    if (t.kind() == model::StateKind::conv) return true;
  return false;
}

} // namespace

Footprint contract_footprint(const model::LaunchCase& c) {
  Footprint f;
  const model::RequestArrays& r = c.requests;
  const I32 B = c.layout.config.mamba_block_size;
  const model::LaunchKindInfo& info = model::launch_kind_info(c.kind);
  for (I32 b = 0; b < c.num_reqs; ++b) {
    const I32 s = slot_of(c, b);
    if (s < 0) continue;
    const auto i = static_cast<std::size_t>(s);
    switch (info.family) {
    case LaunchFamily::postprocess:
      save_decision(f, b, s, b,
                    std::int64_t{r.num_computed[i]} + r.num_scheduled[i] - r.num_draft[i],
                    r.num_accepted[i], r.state_idx[i], B);
      break;
    case LaunchFamily::postprocess_align:
      save_decision(f, b, s, table_row_of(c, b, s),
                    std::int64_t{r.new_num_computed[i]} - r.num_accepted[i] + 1, r.num_accepted[i],
                    r.state_idx[i], B);
      break;
    case LaunchFamily::precopy:
      if (r.src_col[i] >= 0 && r.src_col[i] != r.state_idx[i]) {
        f.copies.push_back(
            {b, s, table_row_of(c, b, s), r.src_col[i], r.state_idx[i], r.token_bias[i]});
        ++f.crossing_rows;
        if (info.work == model::LaunchWork::copy_plan && r.token_bias[i] > 0 &&
            has_ds_conv(c.layout))
          f.unsupported = true;
      } else {
        ++f.steady_rows;
      }
      break;
    case LaunchFamily::preprocess_align: {
      const std::int64_t qlen = r.query_start_loc[static_cast<std::size_t>(b) + 1] -
                                r.query_start_loc[static_cast<std::size_t>(b)];
      const std::int64_t next = model::cdiv(r.num_computed[i] + qlen, B) - 1;
      ++(r.state_idx[i] >= 0 && r.state_idx[i] != next ? f.crossing_rows : f.steady_rows);
      break;
    }
    }
  }
  return f;
}

model::LaunchCase case_without_arenas(const LaunchSpec& spec) {
  model::LaunchCase c;
  c.layout = model::build_layout(spec.config, spec.layout_spec);
  c.kind = spec.kind;
  c.num_reqs = spec.num_reqs;
  c.num_slots = spec.num_slots;
  c.block_tables = spec.block_tables;
  c.requests = spec.requests;
  return c;
}

} // namespace mc::fuzz::testing
