// One kernel launch: its case (inputs) and its result (DESIGN.md, "Kernel level").
//
// Per-request arrays are int32 and indexed as the seeds index them:
// - V1 kinds (postprocess, batch_copy, precopy_v1): arrays and block-table rows by request
//   row, idx_mapping empty.
// - V2 kinds (postprocess_align, precopy, preprocess_align): arrays by request
//   slot, block-table rows by batch row, idx_mapping[batch row] = slot (-1: skip).
// - V2 kinds with per-slot tables (postprocess_align_slot_tables, precopy_slot_tables):
//   arrays AND block-table rows by slot, idx_mapping[batch row] = slot (-1: skip).
// Arrays a kind does not read stay empty. Equality of two results is exact:
// status, every array, every decision, every arena byte.
#pragma once

#include "model/arena.h"
#include "model/block_table.h"
#include "model/layout.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

enum class LaunchKind : std::uint8_t {
  postprocess,       // V1 fused postprocess: scheduled/computed/draft; a -> num_accepted_out
  postprocess_align, // V2: precomputed new computed count; a reset in place
  precopy,           // V2 (and fused V1) pre-step copy: src_col -> state_idx with token_bias
  preprocess_align,  // V2 bookkeeping: src_col, token_bias (src_off), new state_idx, reset of a
  batch_copy,        // V1 flat copy plan: per request src_col -> state_idx with token_bias
  precopy_v1,        // V1 fused pre-step copy as vLLM launches it: no idx_mapping, rows direct
  postprocess_align_slot_tables, // postprocess_align, each row's table found at its slot
  precopy_slot_tables,           // precopy, each row's table found at its slot
};
inline constexpr LaunchKind kAllLaunchKinds[] = {LaunchKind::postprocess,
                                                 LaunchKind::postprocess_align,
                                                 LaunchKind::precopy,
                                                 LaunchKind::preprocess_align,
                                                 LaunchKind::batch_copy,
                                                 LaunchKind::precopy_v1,
                                                 LaunchKind::postprocess_align_slot_tables,
                                                 LaunchKind::precopy_slot_tables};

std::string_view to_string(LaunchKind kind);
LaunchKind parse_launch_kind(std::string_view text); // throws InputError
bool uses_idx_mapping(LaunchKind kind);              // the V2 kinds
bool tables_by_slot(LaunchKind kind); // a row's block-table row is its slot (#55506), not b

struct RequestArrays {
  std::vector<std::int32_t> idx_mapping;       // [num_reqs] batch row -> slot, -1 skips (V2)
  std::vector<std::int32_t> num_accepted;      // a per slot; V2 kinds update it in place
  std::vector<std::int32_t> state_idx;         // running column per slot (mamba_state_idx)
  std::vector<std::int32_t> num_scheduled;     // postprocess (V1)
  std::vector<std::int32_t> num_computed;      // postprocess (V1), preprocess_align
  std::vector<std::int32_t> num_draft;         // postprocess (V1)
  std::vector<std::int32_t> new_num_computed;  // postprocess_align (V2)
  std::vector<std::int32_t> query_start_loc;   // preprocess_align, [num_reqs + 1] by batch row
  std::vector<std::int32_t> src_col;           // precopy and batch_copy in; preprocess_align out
  std::vector<std::int32_t> token_bias;        // precopy and batch_copy in; preprocess_align out
  std::vector<std::int32_t> num_accepted_out;  // postprocess (V1) out

  bool operator==(const RequestArrays&) const = default;
};

struct LaunchCase {
  Layout layout;
  LaunchKind kind = LaunchKind::postprocess;
  std::int32_t num_reqs = 0;   // batch rows launched
  std::int32_t num_slots = 0;  // length of per-slot arrays (== num_reqs for V1 kinds)
  BlockTables block_tables;
  RequestArrays requests;
  std::vector<Arena> arenas;   // one per Layout::arenas entry

  LaunchCase clone() const;
};

// One (request, state) copy, as decided. Offsets are within the block.
struct CopyDecision {
  std::int32_t batch_row = 0;
  std::int32_t slot = 0;
  std::int32_t tensor = 0; // index into Layout::tensors
  std::int32_t group = 0;
  std::int32_t layer = 0;
  std::int32_t state = 0;
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  std::int32_t token_bias = 0;
  std::int32_t src_block_id = 0;
  std::int32_t dst_block_id = 0;
  std::int64_t src_byte_offset = 0; // where the copy starts inside the src block (per DS row)
  std::int64_t bytes = 0;           // total bytes moved (all DS rows together)

  bool operator==(const CopyDecision&) const = default;
  auto operator<=>(const CopyDecision&) const = default;
};

enum class LaunchStatus : std::uint8_t { ok, unsupported };

struct LaunchResult {
  LaunchStatus status = LaunchStatus::ok;
  std::string unsupported_reason; // why, when status is unsupported (e.g. DS with bias > 0 in V1)
  RequestArrays requests;         // every per-request array after the launch
  std::vector<CopyDecision> decisions; // sorted (batch_row, tensor)
  std::vector<Arena> arenas;

  LaunchResult clone() const;
};

} // namespace mc::model
