// describe(): a one-paragraph account of a LaunchSpec for reports and counterexamples.
//
// It names the kind, the config, each group's states with their shapes, element sizes
// and page policy, the pool and table sizes; for small cases it also lists every
// per-request array and table row, so that a shrunk counterexample reads whole.
#include "fuzz/gen_launch.h"
#include "model/request_arrays.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>

namespace mc::fuzz {
namespace {

constexpr std::int32_t kListRowsMax = 16;
constexpr std::int32_t kListWidthMax = 40;

std::string describe_group(const model::Layout& layout, std::int32_t g) {
  const model::GroupSpec& spec = layout.spec.groups[static_cast<std::size_t>(g)];
  std::string states;
  for (const model::StateTensor& t : layout.tensors) {
    if (t.group != g || t.layer != 0) continue;
    states += fmt::format("{}{} [{}] x{}B", states.empty() ? "" : ", ", t.shape.name,
                          fmt::join(t.shape.dims, "x"), t.elem_size);
    if (t.block_stride_bytes != t.natural_bytes)
      states += fmt::format(" (stride {})", t.block_stride_bytes);
  }
  return fmt::format("group {} {} x{} layers ({}; {} pages aligned to {})", g,
                     model::to_string(spec.family), spec.num_layers, states,
                     spec.page_policy == model::PagePolicy::shared ? "shared" : "separate",
                     spec.page_align_bytes);
}

// Every array the case has, in the table's order (model/request_arrays.h).
std::string list_arrays(const model::RequestArrays& r) {
  std::string out;
  for (const model::RequestArrayField& f : model::kRequestArrays)
    if (const std::vector<std::int32_t>& v = r.*f.member; !v.empty())
      out += fmt::format("; {}=[{}]", f.name, fmt::join(v, ","));
  return out;
}

std::string list_tables(const model::BlockTables& tables) {
  std::string out;
  for (std::size_t g = 0; g < tables.groups.size(); ++g) {
    const model::BlockTable& t = tables.groups[g];
    std::vector<std::string> rows;
    for (std::int32_t r = 0; r < t.num_rows; ++r) {
      std::vector<std::int32_t> row;
      for (std::int32_t c = 0; c < t.row_width; ++c)
        row.push_back(t.at(r, c));
      rows.push_back(fmt::format("[{}]", fmt::join(row, ",")));
    }
    out += fmt::format("; table g{}=[{}]", g, fmt::join(rows, " "));
  }
  return out;
}

} // namespace

std::string describe(const LaunchSpec& spec) {
  const model::Layout layout = model::build_layout(spec.config, spec.layout_spec);
  const model::CacheConfig& c = spec.config;
  std::string out =
      fmt::format("{} launch ({} case): B={} (attn {}), {} spec tokens, conv {}, tp {}; ",
                  model::to_string(spec.kind), to_string(spec.size_class), c.mamba_block_size,
                  c.attn_block_size, c.num_spec_tokens, model::to_string(c.conv_layout), c.tp_size);
  for (std::int32_t g = 0; g < layout.num_groups(); ++g)
    out += describe_group(layout, g) + "; ";
  const model::BlockTable& t0 = spec.block_tables.groups.front();
  out += fmt::format("{} blocks per state ({} bytes in {} arenas); {} batch rows over {} slots; "
                     "tables width {}, stride {}; fill seed {:#x}",
                     spec.layout_spec.num_blocks, layout.total_bytes(), layout.arenas.size(),
                     spec.num_reqs, spec.num_slots, t0.row_width, t0.row_stride, spec.fill_seed);
  if (spec.num_reqs <= kListRowsMax && t0.row_width <= kListWidthMax)
    out += list_arrays(spec.requests) + list_tables(spec.block_tables);
  return out + ".";
}

void showValue(const LaunchSpec& spec, std::ostream& os) {
  os << describe(spec);
}

} // namespace mc::fuzz
