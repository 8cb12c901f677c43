// Valid random launch cases for comparing backends: every request owns its own blocks (so
// no two requests' copies overlap, as the contract requires), with same-block shifts,
// skipped rows, idx_mapping permutations and every kind's inputs drawn in range.
#pragma once

#include "model/launch.h"
#include "tests/gpu/case_helpers.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace mc::gpu::test {

inline constexpr std::int32_t kRandomRowWidth = 6;

struct RandomRow {
  std::int32_t state_idx = 0;
  std::int32_t a = 1;
  std::int32_t running = 0;
};

// Fills per-slot inputs of `kind` for slot s (rows and slots are permuted apart for V2).
inline void fill_slot(model::LaunchCase& c, std::mt19937& rng, std::size_t s) {
  const std::int32_t block_size = c.layout.config.mamba_block_size;
  auto pick = [&rng](std::int32_t lo, std::int32_t hi) {
    return std::uniform_int_distribution<std::int32_t>(lo, hi)(rng);
  };
  model::RequestArrays& r = c.requests;
  const std::int32_t state_idx = pick(1, 3);
  const std::int32_t a = pick(1, 3);
  const std::int32_t running = state_idx * block_size + pick(0, block_size);
  r.state_idx[s] = state_idx;
  r.num_accepted[s] = a;
  r.num_computed[s] = running - 3;
  r.num_scheduled[s] = 3 + a - 1;
  r.num_draft[s] = a - 1;
  r.new_num_computed[s] = running + a - 1;
  r.src_col[s] = pick(-1, 3);
  if (pick(0, 3) == 0) r.src_col[s] = state_idx; // same column: skipped
  r.token_bias[s] = pick(0, 2);
}

inline model::LaunchCase random_case(model::Layout layout, model::LaunchKind kind,
                                     std::int32_t num_reqs, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const bool v2 = model::uses_idx_mapping(kind);
  const std::int32_t num_slots = v2 ? num_reqs + 3 : num_reqs;
  const std::int64_t blocks_needed = 1 + std::int64_t{num_reqs} * kRandomRowWidth;
  MC_ASSERT(layout.spec.num_blocks >= blocks_needed);
  model::LaunchCase c =
      make_case(std::move(layout), kind, num_reqs, kRandomRowWidth, kRandomRowWidth + 3);
  c.num_slots = num_slots;
  for (std::int32_t row = 0; row < num_reqs; ++row) {
    std::vector<std::int32_t> blocks(kRandomRowWidth);
    std::iota(blocks.begin(), blocks.end(), 1 + row * kRandomRowWidth);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    if (rng() % 4 == 0) blocks[2] = blocks[1]; // two columns aliasing one block
    set_row(c, row, blocks);
  }
  model::RequestArrays& r = c.requests;
  for (auto* v : {&r.state_idx, &r.num_accepted, &r.num_computed, &r.num_scheduled, &r.num_draft,
                  &r.new_num_computed, &r.src_col, &r.token_bias})
    v->assign(static_cast<std::size_t>(num_slots), 0);
  for (std::size_t s = 0; s < static_cast<std::size_t>(num_slots); ++s)
    fill_slot(c, rng, s);
  if (v2) {
    std::vector<std::int32_t> slots(static_cast<std::size_t>(num_slots));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(static_cast<std::size_t>(num_reqs));
    for (auto& s : slots)
      if (rng() % 8 == 0) s = -1;
    r.idx_mapping = slots;
  }
  if (model::tables_by_slot(kind)) {
    // Per-slot tables: row b's blocks move to the row of its slot; a slot no row maps to holds
    // pads (never read).
    for (model::BlockTable& t : c.block_tables.groups) {
      model::BlockTable by_slot = model::BlockTable::make(num_slots, t.row_width, t.row_stride);
      for (std::int32_t row = 0; row < num_reqs; ++row) {
        const std::int32_t slot = r.idx_mapping[static_cast<std::size_t>(row)];
        if (slot < 0) continue;
        for (std::int32_t col = 0; col < t.row_width; ++col)
          by_slot.at(slot, col) = t.at(row, col);
      }
      t = std::move(by_slot);
    }
  }
  r.query_start_loc.assign(1, 0);
  for (std::int32_t row = 0; row < num_reqs; ++row)
    r.query_start_loc.push_back(r.query_start_loc.back() + static_cast<std::int32_t>(rng() % 5));
  return c;
}

} // namespace mc::gpu::test
