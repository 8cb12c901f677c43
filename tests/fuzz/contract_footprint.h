// The contract's footprint of a launch, recomputed in the tests from the arrays alone.
//
// The generator builds cases from chosen outcomes; this file goes the other way and
// decides, per model/LAUNCH_KINDS.md, which rows copy what, then checks the validity
// rules (columns in range, block ids in the pool, idx_mapping injective, no write of
// one request touching another request's copy). Kept apart from fuzz/ so that a
// generator bug cannot hide behind its own reasoning. Overlap is checked per (group,
// block), stricter than the byte ranges of the contract: the generator must satisfy it.
#pragma once

#include "fuzz/gen_launch.h"
#include "model/launch.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::fuzz::testing {

struct PlannedCopy {
  std::int32_t batch_row = 0;
  std::int32_t slot = 0;
  std::int32_t table_row = 0; // the batch row, or the slot for the _slot_tables kinds
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  std::int32_t bias = 0;
};

struct Footprint {
  std::vector<PlannedCopy> copies; // per the contract (batch_copy: planned, even if unsupported)
  bool unsupported = false;        // batch_copy with a DS conv tensor and a bias > 0
  std::int32_t resets = 0;         // postprocess kinds: rows with src == dst (a reset to 1)
  std::int32_t crossing_rows = 0;  // save: a copy is decided; preprocess: the index moves
  std::int32_t steady_rows = 0;    // mapped rows that neither copy nor move
};

Footprint contract_footprint(const model::LaunchCase& launch);

// The first broken validity rule, or nothing.
std::optional<std::string> find_invalidity(const model::LaunchCase& launch);

// A LaunchCase with layout, tables and arrays but no arenas (cheap for big pools).
model::LaunchCase case_without_arenas(const LaunchSpec& spec);

} // namespace mc::fuzz::testing
