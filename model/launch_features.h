// What one launch's decisions show about each of its batch rows, in the terms of the cases the
// reference design must get right (REFERENCE.md 2 and 5): a same-block shift, two columns
// aliasing one block, a reset of num_accepted, a skipped V2 row, a null source, pad slots in the
// row, a DS conv copy with a bias, an offset past 4 GiB, a state sharing its page, a per-slot
// table read at a row other than the batch row. A failing
// row's signature names its features (fuzz/campaign/kernel_signature.h) and coverage counts
// them over a campaign (model/coverage.h), from the same classification: the oracle's
// decisions and arrays, never what a generator meant to draw.
#pragma once

#include "model/block_table.h"
#include "model/launch.h"
#include "model/layout.h"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace mc::model {

enum class RowFeature : std::uint8_t {
  copy,             // at least one (request, state) copy
  no_copy,          // none
  same_block_shift, // one block read and written: a same-column save with a bias, or aliasing
  aliased_columns,  // the column read and the column written differ but hold one block
  resets_accepted,  // num_accepted became 1 (a src == dst save, or a V2 pre-step column change)
  skipped_row,      // idx_mapping -1: the V2 kernels must skip the row
  null_source,      // a copy reads the null block (block 0)
  pad_slots,        // the row's table holds pad slots (-1) the kernels must never follow
  ds_bias,          // a DS-layout conv state copied with a token bias (per-dim-row tails)
  offset_past_4GiB, // a block of the copy ends past 2^32 bytes of its arena
  shared_page,      // the state copied shares its page with other states (page padding)
  slot_table_row,   // a copy read its per-slot table at slot != batch row (#55506)
};
inline constexpr std::size_t kRowFeatureCount = 12;

std::string_view to_string(RowFeature feature);

// The features of each batch row, as bits (1 << RowFeature).
using RowFeatureMask = std::uint32_t;
inline bool has(RowFeatureMask mask, RowFeature f) {
  return (mask >> static_cast<unsigned>(f)) & 1U;
}

// One launch as the oracle ran it. `before` and `tables` may be null where the caller does not
// keep them (an engine step's launch record): resets_accepted and pad_slots are then never set.
struct LaunchFacts {
  const Layout* layout = nullptr;
  LaunchKind kind = LaunchKind::postprocess;
  std::int32_t num_reqs = 0;
  const RequestArrays* before = nullptr; // the arrays as the launch started
  const RequestArrays* after = nullptr;  // the arrays after it (idx_mapping is read here)
  const BlockTables* tables = nullptr;   // by batch row
  std::span<const CopyDecision> decisions;
};

// The features of every batch row, in one pass over the decisions.
std::vector<RowFeatureMask> row_features(const LaunchFacts& launch);

// Whether state tensor `tensor` shares its arena's page with other states.
bool tensor_shares_page(const Layout& layout, std::int32_t tensor);

// The slot batch row `b` reads and writes: idx_mapping[b] for the V2 kinds (-1: skipped),
// `b` for the V1 kinds.
std::int32_t slot_of_row(LaunchKind kind, const RequestArrays& arrays, std::int32_t b);

} // namespace mc::model
