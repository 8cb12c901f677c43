// Field-wise equality of LaunchSpecs: the config, every group's parameters, the tables,
// the arrays and the seed (model/ defines no equality for its config structs).
#include "fuzz/gen_launch.h"

#include <tuple>

namespace mc::fuzz {
namespace {

auto tie(const model::CacheConfig& c) {
  return std::tie(c.mamba_block_size, c.attn_block_size, c.num_spec_tokens, c.num_spec_blocks,
                  c.mode, c.conv_layout, c.runner, c.tp_size);
}

auto tie(const model::FamilyParams& p) {
  return std::tie(p.intermediate_size, p.n_groups, p.num_heads, p.head_dim, p.state_size,
                  p.conv_kernel, p.num_k_heads, p.num_v_heads, p.head_k_dim, p.head_v_dim);
}

bool same_group(const model::GroupSpec& a, const model::GroupSpec& b) {
  return std::tie(a.name, a.family, a.num_layers, a.conv_elem_size, a.temporal_elem_size,
                  a.page_policy, a.page_align_bytes) ==
             std::tie(b.name, b.family, b.num_layers, b.conv_elem_size, b.temporal_elem_size,
                      b.page_policy, b.page_align_bytes) &&
         tie(a.params) == tie(b.params);
}

bool same_layout(const model::LayoutSpec& a, const model::LayoutSpec& b) {
  if (a.num_blocks != b.num_blocks || a.groups.size() != b.groups.size()) return false;
  for (std::size_t g = 0; g < a.groups.size(); ++g)
    if (!same_group(a.groups[g], b.groups[g])) return false;
  return true;
}

} // namespace

bool operator==(const LaunchSpec& a, const LaunchSpec& b) {
  return tie(a.config) == tie(b.config) && same_layout(a.layout_spec, b.layout_spec) &&
         std::tie(a.kind, a.num_reqs, a.num_slots, a.block_tables, a.requests, a.fill_seed,
                  a.size_class) == std::tie(b.kind, b.num_reqs, b.num_slots, b.block_tables,
                                            b.requests, b.fill_seed, b.size_class);
}

} // namespace mc::fuzz
