// Coverage features (see coverage.h).
#include "coverage.h"

#include "contract_footprint.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace mc::fuzz::testing {
namespace {

using I32 = std::int32_t;

std::string bucket(I32 v, std::initializer_list<std::pair<I32, const char*>> upper_bounds) {
  for (const auto& [hi, name] : upper_bounds)
    if (v <= hi) return name;
  return "more";
}

void layout_features(const LaunchSpec& spec, const model::Layout& layout,
                     std::set<std::string>& out) {
  for (const model::GroupSpec& g : spec.layout_spec.groups) {
    out.insert(fmt::format("family:{}", model::to_string(g.family)));
    out.insert(g.page_policy == model::PagePolicy::shared ? "pages:shared" : "pages:separate");
    if (g.page_align_bytes == 4096) out.insert("align:4096");
    if (g.page_align_bytes == 96) out.insert("align:96");
    if (g.num_layers > 1) out.insert("layers>1");
  }
  I32 layers = 0;
  for (const model::GroupSpec& g : spec.layout_spec.groups)
    layers += g.num_layers;
  if (layers >= 32) out.insert("layers>=32");
  for (const model::StateTensor& t : layout.tensors) {
    out.insert(fmt::format("{}_elem:{}", t.kind() == model::StateKind::conv ? "conv" : "temporal",
                           t.elem_size));
    if (t.block_stride_bytes > t.natural_bytes) out.insert("padded");
  }
  out.insert(fmt::format("groups:{}", spec.layout_spec.groups.size()));
  out.insert(fmt::format("conv:{}", model::to_string(spec.config.conv_layout)));
  out.insert(fmt::format("class:{}", to_string(spec.size_class)));
  out.insert("spec:" + bucket(spec.config.num_spec_tokens, {{0, "0"}, {3, "1-3"}, {8, "4-8"}}));
  out.insert("B:" + bucket(spec.config.mamba_block_size,
                           {{1, "1"}, {8, "2-8"}, {64, "9-64"}, {512, "65-512"}, {4096, ">512"}}));
}

void table_features(const LaunchSpec& spec, const model::Layout& layout,
                    std::set<std::string>& out) {
  I32 id_max = 0;
  for (const model::BlockTable& t : spec.block_tables.groups) {
    if (t.row_stride > t.row_width) out.insert("stride-gap");
    if (t.row_width >= 1000) out.insert("width>=1000");
    for (I32 r = 0; r < t.num_rows; ++r)
      for (I32 c = 0; c < t.row_width; ++c) {
        id_max = std::max(id_max, t.at(r, c));
        if (t.at(r, c) == model::kNullBlockId) out.insert("null-in-table");
      }
  }
  if (id_max >= 65536) out.insert("big-ids");
  for (const model::StateTensor& t : layout.tensors)
    if (t.block_offset_bytes(id_max) >= (std::int64_t{1} << 32)) out.insert("offset>2^32");
  const auto& map = spec.requests.idx_mapping;
  if (std::count(map.begin(), map.end(), model::kPadSlot) > 0) out.insert("idx-holes");
  for (std::size_t b = 0; b < map.size(); ++b)
    if (map[b] >= 0 && map[b] != static_cast<I32>(b)) out.insert("idx-permuted");
  if (spec.num_slots > spec.num_reqs) out.insert("slots>reqs");
  if (spec.num_reqs >= 100) out.insert("reqs>=100");
}

void copy_features(const model::LaunchCase& c, const Footprint& f, std::set<std::string>& out) {
  if (f.crossing_rows > 0) out.insert("crossing");
  if (f.steady_rows > 0) out.insert("steady");
  if (f.resets > 0) out.insert("reset");
  if (f.unsupported) out.insert("unsupported");
  std::map<std::pair<std::size_t, I32>, std::set<I32>> readers;
  for (const PlannedCopy& p : f.copies) {
    out.insert("copy");
    for (std::size_t g = 0; g < c.block_tables.groups.size(); ++g) {
      const model::BlockTable& t = c.block_tables.groups[g];
      const auto at = [&](I32 col) { return col < t.row_width ? t.at(p.table_row, col) : -2; };
      const I32 src = at(p.src_col);
      const I32 tsrc = at(p.src_col + p.bias);
      const I32 dst = at(p.dst_col);
      if (src == dst && p.src_col != p.dst_col) out.insert("alias:two-cols-one-block");
      if (src == dst && p.bias > 0) out.insert("alias:same-block-shift");
      if (tsrc == dst && p.bias > 0) out.insert("alias:temporal-self-copy");
      if (src == model::kNullBlockId || tsrc == model::kNullBlockId) out.insert("null-read");
      readers[{g, src}].insert(p.batch_row);
    }
    for (const model::StateTensor& t : c.layout.tensors)
      if (t.kind() == model::StateKind::conv && p.bias >= t.shape.conv_state_len)
        out.insert("bias>=w");
  }
  for (const auto& [key, rows] : readers)
    if (rows.size() > 1) out.insert("shared-read");
}

} // namespace

std::vector<std::string> coverage_features(const LaunchSpec& spec) {
  const model::LaunchCase c = case_without_arenas(spec);
  std::set<std::string> out{fmt::format("kind:{}", model::to_string(spec.kind))};
  layout_features(spec, c.layout, out);
  table_features(spec, c.layout, out);
  copy_features(c, contract_footprint(c), out);
  return {out.begin(), out.end()};
}

const std::vector<std::string>& required_features() {
  static const std::vector<std::string> features = [] {
    std::vector<std::string> f;
    for (const model::LaunchKind k : model::kAllLaunchKinds)
      f.push_back(fmt::format("kind:{}", model::to_string(k)));
    for (const model::Family fam : model::kAllFamilies)
      f.push_back(fmt::format("family:{}", model::to_string(fam)));
    for (const SizeClass s : kAllSizeClasses)
      f.push_back(fmt::format("class:{}", to_string(s)));
    for (const char* name : {"conv:SD",
                             "conv:DS",
                             "pages:shared",
                             "pages:separate",
                             "padded",
                             "align:4096",
                             "align:96",
                             "layers>1",
                             "layers>=32",
                             "groups:1",
                             "groups:2",
                             "groups:3",
                             "conv_elem:2",
                             "conv_elem:4",
                             "conv_elem:8",
                             "temporal_elem:2",
                             "temporal_elem:4",
                             "temporal_elem:8",
                             "spec:0",
                             "spec:1-3",
                             "spec:4-8",
                             "B:1",
                             "B:2-8",
                             "B:9-64",
                             "B:65-512",
                             "B:>512",
                             "stride-gap",
                             "width>=1000",
                             "null-in-table",
                             "big-ids",
                             "offset>2^32",
                             "idx-holes",
                             "idx-permuted",
                             "slots>reqs",
                             "reqs>=100",
                             "crossing",
                             "steady",
                             "reset",
                             "unsupported",
                             "copy",
                             "alias:two-cols-one-block",
                             "alias:same-block-shift",
                             "alias:temporal-self-copy",
                             "null-read",
                             "shared-read",
                             "bias>=w"})
      f.emplace_back(name);
    return f;
  }();
  return features;
}

} // namespace mc::fuzz::testing
