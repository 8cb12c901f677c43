// Layout generation (see gen_layout.h): configs, families, parameters, page policies.
#include "fuzz/gen_layout.h"

#include "fuzz/gen_pick.h"

#include <algorithm>

namespace mc::fuzz::detail {
namespace {

using model::Family;

// Upper bounds of the per-shard dimensions drawn for one size class.
struct DimBounds {
  std::int32_t channels_lo = 1, channels_hi = 4; // conv channels per shard
  std::int32_t state_hi = 3;                     // d_state
  std::int32_t heads_hi = 2;                     // heads per shard
  std::int32_t head_dim_lo = 1, head_dim_hi = 3;
  std::int32_t kernel_hi = 4; // conv kernel K
};

DimBounds bounds_for(SizeClass size_class) {
  switch (size_class) {
  case SizeClass::tiny:
    return {};
  case SizeClass::small:
    return {1, 16, 8, 4, 1, 8, 5};
  case SizeClass::wide_states:
    return {32, 256, 32, 4, 8, 32, 5};
  case SizeClass::grid:
  case SizeClass::big_offset:
    return {1, 2, 2, 1, 1, 2, 3};
  }
  return {};
}

std::int32_t pick_block_size() {
  switch (pick_weighted({40, 30, 20, 10})) {
  case 0:
    return pick_int(1, 8);
  case 1:
    return pick_int(9, 64);
  case 2:
    return 1 << pick_int(7, 9); // 128..512
  default:
    return pick_int(513, 4096);
  }
}

std::int32_t pick_num_spec() {
  switch (pick_weighted({25, 50, 25})) {
  case 0:
    return 0;
  case 1:
    return pick_int(1, 3);
  default:
    return pick_int(4, 8);
  }
}

// A conv kernel K; K == 1 only where the window still has drafts (mamba2, GDN with num_spec > 0).
std::int64_t pick_kernel(const DimBounds& b, bool window_has_drafts) {
  return pick_int(window_has_drafts && pick_bool(10) ? 1 : 2, b.kernel_hi);
}

model::FamilyParams pick_params(Family family, std::int32_t tp, std::int32_t num_spec,
                                const DimBounds& b) {
  model::FamilyParams p;
  const auto channels = [&] { return std::int64_t{tp} * pick_int(b.channels_lo, b.channels_hi); };
  const auto heads = [&] { return std::int64_t{tp} * pick_int(1, b.heads_hi); };
  const auto head_dim = [&] { return std::int64_t{pick_int(b.head_dim_lo, b.head_dim_hi)}; };
  switch (family) {
  case Family::mamba1:
  case Family::short_conv:
    p.intermediate_size = channels();
    p.state_size = pick_int(1, b.state_hi);
    p.conv_kernel = pick_kernel(b, false);
    break;
  case Family::mamba2:
    p.intermediate_size = channels();
    // 1 group is replicated per shard, tp groups divide, any other count is padded (seed 001).
    p.n_groups = pick_weighted({50, 30, 20}) == 0 ? 1 : (pick_bool(50) ? tp : pick_int(1, 4));
    p.num_heads = heads();
    p.head_dim = head_dim();
    p.state_size = pick_int(1, b.state_hi);
    p.conv_kernel = pick_kernel(b, num_spec > 0);
    break;
  case Family::gated_delta_net:
    p.num_k_heads = heads();
    p.num_v_heads = p.num_k_heads * pick_int(1, 2);
    p.head_k_dim = head_dim();
    p.head_v_dim = head_dim();
    p.conv_kernel = pick_kernel(b, num_spec > 0);
    break;
  case Family::kda:
    p.num_heads = heads();
    p.head_dim = head_dim();
    if (pick_bool(30)) {
      p.num_k_heads = heads();
      p.head_k_dim = head_dim();
    }
    p.conv_kernel = pick_kernel(b, false);
    break;
  case Family::linear_attention:
    // num_heads // tp floors in seed 001: sometimes leave a remainder.
    p.num_heads = heads() + (pick_bool(20) ? pick_int(0, tp - 1) : 0);
    p.head_dim = head_dim();
    break;
  }
  return p;
}

std::int32_t pick_elem_size() {
  return 2 << pick_int(0, 2);
}

std::int64_t pick_page_align() {
  constexpr std::int64_t kAligns[] = {1, 8, 16, 64, 96, 4096};
  const auto k = static_cast<std::size_t>(pick_weighted({35, 15, 10, 15, 10, 5, 10}));
  return k < std::size(kAligns) ? kAligns[k] : 8 * pick_int(2, 64);
}

Family pick_family(bool two_states_min) {
  if (two_states_min) {
    constexpr Family kMulti[] = {Family::mamba2, Family::mamba1, Family::gated_delta_net,
                                 Family::kda};
    return kMulti[pick_int(0, 3)];
  }
  return model::kAllFamilies[pick_int(0, 5)];
}

std::int32_t pick_group_count(SizeClass size_class, int size) {
  switch (size_class) {
  case SizeClass::tiny:
    return size < 10 ? 1 : 1 + pick_weighted({60, 25, 15});
  case SizeClass::small:
    return 1 + pick_weighted({50, 30, 20});
  case SizeClass::wide_states:
    return 1 + pick_weighted({80, 20});
  case SizeClass::grid:
    return 1 + pick_weighted({60, 40});
  case SizeClass::big_offset:
    return 1;
  }
  return 1;
}

// Layers per group; a grid spreads [grid_layers_min, grid_layers_max] over its groups.
std::vector<std::int32_t> pick_layer_counts(SizeClass size_class, int size, std::int32_t num_groups,
                                            const GenOptions& options) {
  std::vector<std::int32_t> layers(static_cast<std::size_t>(num_groups), 1);
  if (size_class == SizeClass::grid) {
    const std::int32_t total = pick_int(options.grid_layers_min, options.grid_layers_max);
    // The first group carries the bulk (>= 2 states each); the others a share.
    std::int32_t rest = total;
    for (std::int32_t g = num_groups - 1; g >= 1; --g) {
      layers[static_cast<std::size_t>(g)] = pick_int(1, std::max(1, total / 4));
      rest -= layers[static_cast<std::size_t>(g)];
    }
    layers[0] = std::max(rest, options.grid_layers_min);
    return layers;
  }
  const std::int32_t hi = size_class == SizeClass::tiny          ? 1 + size / 25
                          : size_class == SizeClass::small       ? 1 + size / 8
                          : size_class == SizeClass::wide_states ? 2
                                                                 : 1;
  for (auto& n : layers)
    n = pick_int(1, hi);
  return layers;
}

} // namespace

model::CacheConfig pick_cache_config(SizeClass size_class, int size, model::LaunchKind kind) {
  model::CacheConfig config;
  config.mamba_block_size = pick_block_size();
  config.attn_block_size = pick_int(1, std::min(config.mamba_block_size, 64));
  config.num_spec_tokens = size < 5 ? std::min(pick_num_spec(), 1) : pick_num_spec();
  config.num_spec_blocks = config.num_spec_tokens; // align mode
  config.mode = model::CacheMode::align;
  config.conv_layout = pick_bool(40) ? model::ConvLayout::DS : model::ConvLayout::SD;
  config.runner =
      model::uses_idx_mapping(kind) ? model::RunnerFlavour::v2 : model::RunnerFlavour::v1;
  config.tp_size =
      size_class == SizeClass::tiny && size < 10 ? 1 : 1 << pick_weighted({50, 25, 15, 10});
  return config;
}

std::vector<model::GroupSpec> pick_groups(SizeClass size_class, int size,
                                          const model::CacheConfig& config,
                                          const GenOptions& options) {
  const std::int32_t num_groups = pick_group_count(size_class, size);
  const std::vector<std::int32_t> layers = pick_layer_counts(size_class, size, num_groups, options);
  const DimBounds bounds = bounds_for(size_class);
  std::vector<model::GroupSpec> groups;
  for (std::int32_t g = 0; g < num_groups; ++g) {
    model::GroupSpec group;
    group.family = pick_family(size_class == SizeClass::grid && g == 0);
    group.name = std::string(model::to_string(group.family)) + "_" + std::to_string(g);
    group.params = pick_params(group.family, config.tp_size, config.num_spec_tokens, bounds);
    group.num_layers = layers[static_cast<std::size_t>(g)];
    group.conv_elem_size = pick_elem_size();
    group.temporal_elem_size = pick_elem_size();
    group.page_policy = pick_bool(50) ? model::PagePolicy::separate : model::PagePolicy::shared;
    group.page_align_bytes = pick_page_align();
    // One arena per case past 2^32 bytes: several states share one page.
    if (size_class == SizeClass::big_offset) group.page_policy = model::PagePolicy::shared;
    groups.push_back(std::move(group));
  }
  return groups;
}

std::int64_t bytes_per_block(const model::CacheConfig& config,
                             const std::vector<model::GroupSpec>& groups) {
  const model::Layout layout = model::build_layout(config, {.groups = groups, .num_blocks = 2});
  std::int64_t total = 0;
  for (const model::ArenaSpec& arena : layout.arenas)
    total += arena.page_bytes;
  return total;
}

void fit_to_budget(const model::CacheConfig& config, std::vector<model::GroupSpec>& groups,
                   std::int64_t num_blocks, std::int64_t bytes_max,
                   std::int32_t first_group_layers_min) {
  const auto fits = [&] { return bytes_per_block(config, groups) * num_blocks <= bytes_max; };
  if (fits()) return;
  for (auto& g : groups)
    g.page_align_bytes = 1;
  if (fits()) return;
  for (auto& g : groups)
    g.conv_elem_size = g.temporal_elem_size = 2;
  for (int round = 0; round < 16 && !fits(); ++round) {
    for (auto& g : groups)
      g.num_layers = std::max(1, g.num_layers / 2);
    groups[0].num_layers = std::max(groups[0].num_layers, first_group_layers_min);
  }
}

} // namespace mc::fuzz::detail
