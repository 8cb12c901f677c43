#include "model/layout.h"

#include "model/errors.h"

#include <algorithm>

namespace mc::model {
namespace {

bool valid_elem_size(std::int32_t size) { return size == 2 || size == 4 || size == 8; }

void validate_group(const GroupSpec& group, std::size_t index) {
  if (group.num_layers <= 0 || group.num_layers > kLayersMax)
    fail_input("layout: group {} ({}) needs 1..{} layers, got {}", index, group.name, kLayersMax,
               group.num_layers);
  if (!valid_elem_size(group.conv_elem_size))
    fail_input("layout: group {} ({}) conv element size must be 2, 4 or 8, got {}", index,
               group.name, group.conv_elem_size);
  if (!valid_elem_size(group.temporal_elem_size))
    fail_input("layout: group {} ({}) temporal element size must be 2, 4 or 8, got {}", index,
               group.name, group.temporal_elem_size);
  if (group.page_align_bytes <= 0 ||
      (group.page_align_bytes % 8 != 0 && group.page_align_bytes != 1))
    fail_input("layout: group {} ({}) page_align_bytes must be 1 or a positive multiple of 8, "
               "got {}",
               index, group.name, group.page_align_bytes);
}

StateTensor make_tensor(const GroupSpec& group, std::int32_t group_index, std::int32_t layer,
                        std::int32_t state, const StateShape& shape, ConvLayout conv_layout) {
  StateTensor t{.group = group_index, .layer = layer, .state = state, .shape = shape};
  t.conv_layout = conv_layout;
  t.elem_size = shape.kind == StateKind::conv ? group.conv_elem_size : group.temporal_elem_size;
  t.natural_bytes = shape.num_elements() * t.elem_size;
  return t;
}

// Places the states of one layer: one shared page, or one arena each.
void place_layer(const GroupSpec& group, std::vector<StateTensor> states, Layout& layout) {
  const std::int64_t num_blocks = layout.spec.num_blocks;
  if (group.page_policy == PagePolicy::separate) {
    for (StateTensor& t : states) {
      // A block stride must stay a whole number of elements (as_strided needs it).
      t.block_stride_bytes = round_up(round_up(t.natural_bytes, group.page_align_bytes), t.elem_size);
      t.arena = static_cast<std::int32_t>(layout.arenas.size());
      layout.arenas.push_back({.page_bytes = t.block_stride_bytes, .num_blocks = num_blocks});
      layout.tensors.push_back(std::move(t));
    }
    return;
  }
  std::int64_t offset = 0;
  std::int32_t elem_size_max = 1;
  for (StateTensor& t : states) {
    offset = round_up(offset, t.elem_size);
    t.offset_bytes = offset;
    offset += t.natural_bytes;
    elem_size_max = std::max(elem_size_max, t.elem_size);
  }
  // The page must be a multiple of every element size so that each strided view is exact.
  const std::int64_t page = round_up(round_up(offset, group.page_align_bytes), 8);
  const std::int32_t arena = static_cast<std::int32_t>(layout.arenas.size());
  layout.arenas.push_back({.page_bytes = page, .num_blocks = num_blocks});
  for (StateTensor& t : states) {
    t.arena = arena;
    t.block_stride_bytes = page;
    layout.tensors.push_back(std::move(t));
  }
}

} // namespace

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  MC_ASSERT(multiple > 0);
  return (value + multiple - 1) / multiple * multiple;
}

void check_layers_max(std::int32_t layers_max) {
  if (layers_max < 0 || layers_max > kLayersMax)
    fail_input("--layers must be in 1..{}, got {}", kLayersMax, layers_max);
}

std::int32_t cap_layers(LayoutSpec& spec, std::int32_t layers_max) {
  std::int32_t deepest = 0;
  for (const GroupSpec& g : spec.groups)
    deepest = std::max(deepest, g.num_layers);
  check_layers_max(layers_max);
  if (layers_max == 0) return deepest;
  for (GroupSpec& g : spec.groups)
    g.num_layers = std::min(g.num_layers, layers_max);
  return deepest;
}

std::string_view to_string(PagePolicy policy) {
  return policy == PagePolicy::shared ? "shared" : "separate";
}

PagePolicy parse_page_policy(std::string_view text) {
  if (text == "shared") return PagePolicy::shared;
  if (text == "separate") return PagePolicy::separate;
  fail_input("expected shared or separate, got '{}'", text);
}

std::int64_t Layout::total_bytes() const {
  std::int64_t total = 0;
  for (const ArenaSpec& a : arenas) total += a.size_bytes();
  return total;
}

Layout build_layout(const CacheConfig& config, const LayoutSpec& spec) {
  validate(config);
  if (spec.groups.empty()) fail_input("layout: at least one mamba group is required");
  if (spec.groups.size() > static_cast<std::size_t>(kGroupsMax))
    fail_input("layout: at most {} groups, got {}", kGroupsMax, spec.groups.size());
  if (spec.num_blocks < 2 || spec.num_blocks > kBlocksMax)
    fail_input("layout: num_blocks must be in 2..{} (block 0 is the null block), got {}",
               kBlocksMax, spec.num_blocks);
  Layout layout{.config = config, .spec = spec};
  for (std::size_t g = 0; g < spec.groups.size(); ++g) {
    const GroupSpec& group = spec.groups[g];
    validate_group(group, g);
    const std::vector<StateShape> shapes = state_shapes(
        group.family, group.params, config.tp_size, config.num_spec_tokens, config.conv_layout);
    for (std::int32_t layer = 0; layer < group.num_layers; ++layer) {
      std::vector<StateTensor> states;
      for (std::size_t s = 0; s < shapes.size(); ++s)
        states.push_back(make_tensor(group, static_cast<std::int32_t>(g), layer,
                                     static_cast<std::int32_t>(s), shapes[s], config.conv_layout));
      place_layer(group, std::move(states), layout);
    }
  }
  return layout;
}

} // namespace mc::model
