#include "cli/layout_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mc::cli {
namespace {

// Element strides of the tensor [num_blocks, dims...] as torch would report them.
std::vector<std::int64_t> element_strides(const model::StateTensor& t) {
  std::vector<std::int64_t> strides(t.shape.dims.size() + 1);
  strides[0] = t.block_stride_bytes / t.elem_size;
  std::int64_t inner = 1;
  for (std::size_t i = t.shape.dims.size(); i > 0; --i) {
    strides[i] = inner;
    inner *= t.shape.dims[i - 1];
  }
  return strides;
}

std::string kind_name(const model::StateTensor& t) {
  if (t.kind() == model::StateKind::temporal) return "temporal";
  return fmt::format("conv/{}", model::to_string(t.conv_layout));
}

std::string human_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

} // namespace

std::string layout_text(const std::string& preset_name, const model::Layout& layout) {
  const model::CacheConfig& c = layout.config;
  std::string out = fmt::format(
      "preset {}: B={} attn_block={} num_spec={} nsb={} conv_layout={} tp={} blocks={}\n",
      preset_name, c.mamba_block_size, c.attn_block_size, c.num_spec_tokens, c.num_spec_blocks,
      model::to_string(c.conv_layout), c.tp_size, layout.spec.num_blocks);
  out += fmt::format("{:>5} {:>5} {:>5} {:<10} {:<10} {:<22} {:<28} {:>4} {:>12} {:>12} {:>10}\n",
                     "group", "layer", "state", "name", "kind", "shape", "strides (elements)",
                     "elem", "bytes/block", "page stride", "page off");
  for (const model::StateTensor& t : layout.tensors) {
    std::vector<std::int64_t> shape{layout.spec.num_blocks};
    shape.insert(shape.end(), t.shape.dims.begin(), t.shape.dims.end());
    out += fmt::format("{:>5} {:>5} {:>5} {:<10} {:<10} {:<22} {:<28} {:>4} {:>12} {:>12} {:>10}\n",
                       t.group, t.layer, t.state, t.shape.name, kind_name(t),
                       fmt::format("({})", fmt::join(shape, ", ")),
                       fmt::format("({})", fmt::join(element_strides(t), ", ")), t.elem_size,
                       t.natural_bytes, t.block_stride_bytes, t.offset_bytes);
  }
  std::int64_t natural = 0;
  for (const model::StateTensor& t : layout.tensors)
    natural += t.natural_bytes;
  std::int64_t page = 0;
  for (const model::ArenaSpec& a : layout.arenas)
    page += a.page_bytes;
  out += fmt::format("{} state tensors in {} arenas; per block: {} natural, {} with padding; "
                     "total for {} blocks: {} ({} bytes)\n",
                     layout.tensors.size(), layout.arenas.size(), human_bytes(natural),
                     human_bytes(page), layout.spec.num_blocks, human_bytes(layout.total_bytes()),
                     layout.total_bytes());
  return out;
}

nlohmann::json layout_json(const std::string& preset_name, const model::Layout& layout) {
  const model::CacheConfig& c = layout.config;
  nlohmann::json tensors = nlohmann::json::array();
  for (const model::StateTensor& t : layout.tensors) {
    std::vector<std::int64_t> shape{layout.spec.num_blocks};
    shape.insert(shape.end(), t.shape.dims.begin(), t.shape.dims.end());
    tensors.push_back({{"group", t.group},
                       {"group_name", layout.spec.groups[t.group].name},
                       {"layer", t.layer},
                       {"state", t.state},
                       {"name", t.shape.name},
                       {"kind", t.kind() == model::StateKind::conv ? "conv" : "temporal"},
                       {"conv_layout", model::to_string(t.conv_layout)},
                       {"shape", shape},
                       {"strides", element_strides(t)},
                       {"elem_size", t.elem_size},
                       {"natural_bytes", t.natural_bytes},
                       {"block_stride_bytes", t.block_stride_bytes},
                       {"arena", t.arena},
                       {"page_offset_bytes", t.offset_bytes}});
  }
  return {{"preset", preset_name},
          {"config",
           {{"mamba_block_size", c.mamba_block_size},
            {"attn_block_size", c.attn_block_size},
            {"num_spec_tokens", c.num_spec_tokens},
            {"num_spec_blocks", c.num_spec_blocks},
            {"conv_layout", model::to_string(c.conv_layout)},
            {"tp_size", c.tp_size}}},
          {"num_blocks", layout.spec.num_blocks},
          {"tensors", tensors},
          {"total_bytes", layout.total_bytes()}};
}

} // namespace mc::cli
