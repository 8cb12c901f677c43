// Layout generation: the cache config and the mamba groups of a generated case.
//
// Hyper-parameters are drawn per TP shard and multiplied by tp, so every sharded
// dimension divides (model/shapes.h throws otherwise). Sizes depend on the size class:
// tiny and grid cases keep states to a few bytes so that tens of layers times hundreds
// of requests stay small; wide_states draws KiB-sized states for few layers.
// Must be called inside rc::gen::exec (see gen_pick.h).
#pragma once

#include "fuzz/gen_launch.h"

#include <cstdint>
#include <vector>

namespace mc::fuzz::detail {

model::CacheConfig pick_cache_config(SizeClass size_class, int size, model::LaunchKind kind);

std::vector<model::GroupSpec> pick_groups(SizeClass size_class, int size,
                                          const model::CacheConfig& config,
                                          const GenOptions& options);

// Bytes of one block summed over every arena of the layout (the page sizes).
std::int64_t bytes_per_block(const model::CacheConfig& config,
                             const std::vector<model::GroupSpec>& groups);

// Shrinks the groups until `num_blocks` blocks fit in `bytes_max`: drops page padding,
// then element sizes, then halves layer counts (never below one layer per group, nor
// below `first_group_layers_min` in group 0: a grid keeps its promised size).
void fit_to_budget(const model::CacheConfig& config, std::vector<model::GroupSpec>& groups,
                   std::int64_t num_blocks, std::int64_t bytes_max,
                   std::int32_t first_group_layers_min);

} // namespace mc::fuzz::detail
