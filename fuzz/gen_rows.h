// Per-request generation: the arrays of one launch, derived from chosen outcomes.
//
// For each batch row the generator first picks what the contract
// (model/LAUNCH_KINDS.md) should decide: no copy, a copy src_col -> dst_col with a
// bias, a same-column reset, a same-column shift, a skip. It then derives the
// counters that lead there (running tokens, accepted drafts, computed and scheduled
// counts), so copies, resets and boundary crossings are frequent rather than rare.
// The RowShape of a row says which table columns its copies read and write; the
// table builder (gen_tables.h) gives those columns blocks that keep the launch valid.
// Must be called inside rc::gen::exec.
#pragma once

#include "fuzz/gen_launch.h"

#include <cstdint>
#include <vector>

namespace mc::fuzz::detail {

// Which columns of its table row one batch row touches.
struct RowShape {
  bool mapped = true;        // V2: idx_mapping[b] != -1 (an unmapped row is never read)
  bool copies = false;       // the contract decides a copy (for batch_copy: one is planned)
  std::int32_t src_col = -1; // conv source column; temporal states read src_col + bias
  std::int32_t dst_col = -1;
  std::int32_t bias = 0;
  std::vector<std::int32_t> live_cols; // further columns holding the request's own blocks

  std::int32_t max_col() const; // -1 when the row touches nothing
};

struct RowContext {
  std::int32_t block_size = 1;
  std::int32_t num_spec = 0;
  std::int32_t cols_max = 1; // destination columns are drawn from [0, cols_max)
  bool ds_conv = false;      // DS layout with a conv tensor: batch_copy bias > 0 is unsupported
  SaveRowWeights save_weights;
};

// Sets spec.num_slots and spec.requests for spec.kind; one RowShape per batch row.
std::vector<RowShape> pick_requests(LaunchSpec& spec, const RowContext& ctx);

// One RowShape per block-table row: the batch rows' own for tables by batch row; for per-slot
// tables (model::tables_by_slot) one per slot, a mapped slot's from its batch row.
std::vector<RowShape> table_row_shapes(const LaunchSpec& spec,
                                       const std::vector<RowShape>& batch_shapes);

} // namespace mc::fuzz::detail
