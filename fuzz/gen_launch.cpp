// The launch-spec generator (see gen_launch.h): size class, config and groups, rows,
// tables, pool size, physical block ids. The pieces live in gen_layout, gen_rows and
// gen_tables; this file decides the sizes and puts them together.
//
// random_launch_spec runs this same RapidCheck generator with rc::Random(seed), so a
// campaign seed and a property run draw from one distribution.
#include "fuzz/gen_launch.h"

#include "fuzz/gen_layout.h"
#include "fuzz/gen_pick.h"
#include "fuzz/gen_rows.h"
#include "fuzz/gen_tables.h"

#include <algorithm>

namespace mc::fuzz {
namespace {

using I32 = std::int32_t;
using detail::pick_bool;
using detail::pick_int;
using detail::pick_int64;
using detail::pick_weighted;

constexpr std::int64_t kFourGiB = std::int64_t{1} << 32;

SizeClass pick_size_class(const ClassWeights& w, int size) {
  // Big classes only once the size parameter is large, unless nothing else is allowed.
  const int wide = size >= 30 ? w.wide_states : 0;
  const int grid = size >= 50 ? w.grid : 0;
  const int big = size >= 50 ? w.big_offset : 0;
  if (w.tiny + w.small + wide + grid + big > 0)
    return kAllSizeClasses[pick_weighted({w.tiny, w.small, wide, grid, big})];
  return kAllSizeClasses[pick_weighted({w.tiny, w.small, w.wide_states, w.grid, w.big_offset})];
}

I32 pick_num_reqs(SizeClass size_class, int size, const GenOptions& options) {
  switch (size_class) {
  case SizeClass::tiny:
    return pick_int(1, 1 + size / 10);
  case SizeClass::small:
    return pick_int(1, 2 + size / 2);
  case SizeClass::wide_states:
  case SizeClass::big_offset:
    return pick_int(1, 4);
  case SizeClass::grid:
    return pick_int(options.grid_reqs_min, options.grid_reqs_max);
  }
  return 1;
}

// Destination columns are drawn below this; small cases sometimes get long rows.
I32 pick_cols_max(SizeClass size_class, int size) {
  switch (size_class) {
  case SizeClass::tiny:
    return pick_int(1, 2 + size / 8);
  case SizeClass::small:
    return pick_bool(10) ? pick_int(64, 2048) : pick_int(1, 4 + size / 2);
  case SizeClass::wide_states:
    return pick_int(1, 8);
  case SizeClass::grid:
    return pick_int(1, 64);
  case SizeClass::big_offset:
    return pick_int(1, 4);
  }
  return 1;
}

bool has_ds_conv(const model::CacheConfig& config, const std::vector<model::GroupSpec>& groups) {
  if (config.conv_layout != model::ConvLayout::DS) return false;
  return std::any_of(groups.begin(), groups.end(), [](const model::GroupSpec& g) {
    return g.family != model::Family::linear_attention;
  });
}

// The pool size: the blocks in use plus slack, within the byte budget; a big_offset
// pool reaches past byte 2^32 of its (single) arena.
std::int64_t pick_num_blocks(SizeClass size_class, std::int64_t needed, std::int64_t block_bytes,
                             const GenOptions& options) {
  if (size_class == SizeClass::big_offset) {
    const std::int64_t past = model::cdiv(kFourGiB, block_bytes);
    return std::min(model::kBlocksMax, past + needed + pick_int64(64, 4096));
  }
  const std::int64_t budget_blocks = std::max(needed, options.arena_bytes_max / block_bytes);
  switch (pick_weighted({40, 35, 25})) {
  case 0:
    return needed;
  case 1:
    return std::min(budget_blocks, needed + pick_int(1, 64));
  default:
    return std::min(budget_blocks, needed + pick_int64(65, std::int64_t{1} << pick_int(8, 20)));
  }
}

detail::BlockIdPolicy pick_id_policy(SizeClass size_class) {
  if (size_class == SizeClass::big_offset) return detail::BlockIdPolicy::high;
  return static_cast<detail::BlockIdPolicy>(pick_weighted({50, 25, 25}));
}

LaunchSpec build_spec(const GenOptions& options, int size) {
  LaunchSpec spec;
  spec.size_class = pick_size_class(options.weights, size);
  const std::vector<model::LaunchKind> kinds =
      options.kinds.empty() ? std::vector<model::LaunchKind>(std::begin(model::kAllLaunchKinds),
                                                             std::end(model::kAllLaunchKinds))
                            : options.kinds;
  spec.kind = kinds[static_cast<std::size_t>(pick_int(0, static_cast<I32>(kinds.size()) - 1))];
  spec.config = detail::pick_cache_config(spec.size_class, size, spec.kind);
  if (spec.config.num_spec_tokens < options.num_spec_min) {
    spec.config.num_spec_tokens = options.num_spec_min;
    spec.config.num_spec_blocks = options.num_spec_min; // align mode
  }
  std::vector<model::GroupSpec> groups =
      detail::pick_groups(spec.size_class, size, spec.config, options);
  spec.num_reqs = pick_num_reqs(spec.size_class, size, options);
  const detail::RowContext ctx{.block_size = spec.config.mamba_block_size,
                               .num_spec = spec.config.num_spec_tokens,
                               .cols_max = pick_cols_max(spec.size_class, size),
                               .ds_conv = has_ds_conv(spec.config, groups),
                               .save_weights = options.save_rows};
  const std::vector<detail::RowShape> shapes =
      detail::table_row_shapes(spec, detail::pick_requests(spec, ctx));

  I32 max_col = 0;
  for (const detail::RowShape& s : shapes)
    max_col = std::max(max_col, s.max_col());
  const I32 width = max_col + 1 + pick_int(0, 2);
  const I32 stride = width + (pick_bool(30) ? pick_int(1, 7) : 0);
  detail::VirtualTables tables = detail::pick_virtual_tables(
      shapes, static_cast<I32>(groups.size()), width, stride, options.tables);

  const std::int64_t needed =
      1 + *std::max_element(tables.num_virtual.begin(), tables.num_virtual.end());
  const I32 layers_min = spec.size_class == SizeClass::grid ? options.grid_layers_min : 1;
  if (spec.size_class != SizeClass::big_offset)
    detail::fit_to_budget(spec.config, groups, std::max<std::int64_t>(needed, 2),
                          options.arena_bytes_max, layers_min);
  const std::int64_t num_blocks = std::max<std::int64_t>(
      2, pick_num_blocks(spec.size_class, needed, detail::bytes_per_block(spec.config, groups),
                         options));
  detail::map_to_physical(tables, num_blocks, pick_id_policy(spec.size_class), detail::pick_seed());
  spec.layout_spec = {.groups = std::move(groups), .num_blocks = num_blocks};
  spec.block_tables = std::move(tables.tables);
  spec.fill_seed = detail::pick_seed();
  return spec;
}

} // namespace

std::string_view to_string(SizeClass size_class) {
  switch (size_class) {
  case SizeClass::tiny:
    return "tiny";
  case SizeClass::small:
    return "small";
  case SizeClass::wide_states:
    return "wide_states";
  case SizeClass::grid:
    return "grid";
  case SizeClass::big_offset:
    return "big_offset";
  }
  return "?";
}

GenOptions GenOptions::host_default() {
  return GenOptions{};
}

GenOptions GenOptions::gpu_grid() {
  GenOptions o;
  o.weights = {.tiny = 0, .small = 0, .wide_states = 0, .grid = 1, .big_offset = 0};
  o.grid_layers_min = 64;
  o.grid_layers_max = 96;
  o.grid_reqs_min = 256;
  o.grid_reqs_max = 384;
  o.arena_bytes_max = std::int64_t{1} << 30;
  return o;
}

GenOptions GenOptions::big_offsets() {
  GenOptions o;
  o.weights = {.tiny = 0, .small = 0, .wide_states = 0, .grid = 0, .big_offset = 1};
  return o;
}

GenOptions GenOptions::races() {
  using model::LaunchKind;
  GenOptions o;
  o.kinds = {
      LaunchKind::postprocess_align, LaunchKind::postprocess_align, LaunchKind::postprocess_align,
      LaunchKind::postprocess_align, LaunchKind::precopy,           LaunchKind::precopy,
      LaunchKind::postprocess,       LaunchKind::batch_copy,        LaunchKind::preprocess_align};
  o.weights = {.tiny = 0, .small = 0, .wide_states = 0, .grid = 1, .big_offset = 0};
  o.save_rows = {.no_copy = 0, .copy = 25, .same_column = 15, .same_column_shift = 60};
  o.tables = {.plain = 10,
              .alias_conv = 25,
              .alias_temporal = 15,
              .null_read = 5,
              .shared_read = 25,
              .prefix_dup = 20};
  o.num_spec_min = 1; // a same-column shift needs a >= 2
  o.grid_layers_min = 64;
  o.grid_layers_max = 128;
  o.grid_reqs_min = 256;
  o.grid_reqs_max = 512;
  o.arena_bytes_max = std::int64_t{128} << 20; // fast reruns: a few per second on one GPU
  return o;
}

std::optional<GenOptions> gen_options_named(std::string_view focus) {
  if (focus == "default") return GenOptions::host_default();
  if (focus == "gpu-grid") return GenOptions::gpu_grid();
  if (focus == "big-offsets") return GenOptions::big_offsets();
  if (focus == "races") return GenOptions::races();
  return std::nullopt;
}

rc::Gen<LaunchSpec> gen_launch_spec(const GenOptions& options) {
  return rc::gen::withSize([options](int size) {
    return rc::gen::exec([options, size] { return build_spec(options, size); });
  });
}

LaunchSpec random_launch_spec(std::uint64_t seed, const GenOptions& options) {
  const int size = options.random_size >= 0 ? options.random_size : static_cast<int>(seed % 101);
  return gen_launch_spec(options)(rc::Random(seed), size).value();
}

} // namespace mc::fuzz
