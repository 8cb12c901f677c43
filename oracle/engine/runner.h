// The model runner on the oracle side, written at the level of the Python (dicts keyed by
// request id, explicit loops over the batch): REFERENCE.md 2 and the seeds' runner utilities.
//
// One execute() per step, in the runner's order:
// - V1: cleanup of stale columns (finished, preempted AND resumed), preprocess_mamba
//   bookkeeping, its copies through batch_copy (the flat plan) or the fused precopy, the
//   synthetic forward, then the fused postprocess launch with this step's accepted counts.
// - V2: request slots (reused by later requests) seeded with (num_computed - 1) // B, the
//   preprocess_align launch, the precopy launch, the forward, postprocess_align with
//   idx_mapping. The copy launches read block tables by batch row (the seed) or by slot
//   (#55506: the _slot_tables kinds); a deferred postprocess finds the batch-row tables
//   gathered in another step's order (model::deferred_gather_order).
// - all mode: the forward at the blocks the attention metadata builder derives (its read
//   anchored at the request's record of its last decode with drafts, when it has one), then
//   postprocess_mamba_all.
// Copies run through mc::oracle::run_launch_in_place on one LaunchCase kept for the whole
// run: it owns the runner's arenas, its block tables are refilled once per step and its
// arrays once per launch (no arena is ever cloned). Before a pre-step copy runs, its source is
// checked against the ground truth, so a stale or mis-seeded column is reported where it is used
// (class A). The result of a step (launch decisions, arrays, accesses) is what a GPU runner must
// match.
#pragma once

#include "model/forward_metadata.h"

#include "model/launch.h"
#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/forward.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/listed_rows.h"
#include "oracle/engine/options.h"
#include "oracle/engine/request_records.h"
#include "oracle/engine/state_store.h"
#include "oracle/engine/structures.h"
#include "oracle/engine/writes.h"
#include "oracle/runner_bookkeeping.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::oracle::engine {

struct SeedNote;

using model::LaunchRecord;

struct StepRecord {
  std::int64_t step = 0;
  model::ForwardMetadata metadata; // what the forward's kernels were handed (forward_metadata.h)
  std::vector<LaunchRecord> launches;
  AccessLog access;
  std::optional<Finding> finding; // the first, which stops the step
  std::int64_t bytes_checked = 0;
  // Async: blocks freed while this step was planned that the step in flight could touch, held
  // back until it completed (the scheduler's, or in a replay the shadow block manager's).
  std::int64_t frees_held_back = 0;
  // State blocks this step's planning retired across a null column (BlockManager).
  std::int64_t retired_across_null = 0;
};

// Where the next step reads a request's initial state: the column and the accepted count.
struct ReadPoint {
  std::int32_t state_idx = 0;
  std::int32_t num_accepted = 1;
  // All mode with spec decode: the block the metadata anchors the read at
  // (block_idx_last_scheduled_token_prev_step); -1 elsewhere.
  std::int32_t anchor = -1;
};

class OracleRunner {
public:
  OracleRunner(const model::Layout& layout, const RunnerOptions& options, Structures structures);

  StepRecord execute(const model::Step& step, const Ledger& ledger);

  const model::Layout& layout() const { return layout_; }
  // The pool's states (state_store.h): meanings on the fast structures, bytes on the plain.
  StateStore& states() { return *states_; }
  // model::conv_history_rows of every tensor (0 for temporal ones), computed once.
  std::span<const std::int64_t> conv_history() const { return conv_history_; }
  // After execute(): where the next step will read (align and all mode).
  std::optional<ReadPoint> read_point(const std::string& req_id) const;
  const model::GroupBlockIds* row(const std::string& req_id) const;
  // The same two for batch row `batch_row` of `step`, the step executed last (asserted); the
  // fast structures keep its records by batch row, the plain ones look them up by id.
  struct NextRead {
    std::optional<ReadPoint> point;
    const model::GroupBlockIds* row = nullptr;
  };
  NextRead next_read(const model::Step& step, std::size_t batch_row) const;

private:
  // What the runner keeps per request id: its block-table row, its counts around the current
  // step and (V1) the a of its last step. One record per request, so that a batch row looks
  // its request up once per step (StepCtx::state) instead of once per dict.
  struct RequestState {
    model::GroupBlockIds row;         // per group; the record lives while the row does
    std::int64_t scheduled_step = -1; // the counts below belong to this step
    std::int32_t num_computed = 0;    // before that step
    std::int32_t next_computed = 0;   // after it
    std::int32_t num_accepted = 1;    // V1 and all mode: a of its last step, when has_accepted
    bool has_accepted = false;
    // V1: its mamba_state_idx entry after that step; all mode: the column the next step reads
    std::int32_t state_idx = 0;
    std::int32_t anchor = -1; // all mode with spec decode: the next step's anchor
    std::int32_t slot = -1;   // V2: its slot in that step
  };
  RequestState& state_of(const std::string& req_id, std::int32_t key) {
    return requests_.at(req_id, key);
  }
  struct Slot { // V2 per-request state, by slot
    std::string req_id;
    std::int32_t state_idx = -1;
    std::int32_t num_accepted = 1;
    std::int32_t num_computed = 0;
    std::int32_t src_col = -1;   // preprocess_align output, precopy input
    std::int32_t token_bias = 0; // preprocess_align output, precopy input
    bool reseeded = false;       // (re)seeded by the current step
  };
  model::RequestArrays slot_arrays() const;
  void store_slot_arrays(const model::RequestArrays& arrays);
  struct StepCtx;
  // The block tables a launch reads: the step's rows in batch order, the same rows in the
  // order a later step gathered (a deferred postprocess), or one row per V2 slot.
  enum class Tables : std::uint8_t { batch, deferred_batch, slots };

  void update_rows(const model::Step& step);
  // The step's block copies (partial-hash hits), before anything else, recorded as writes of
  // no batch row (BlockAccess::batch_row -1).
  void copy_blocks(const model::Step& step, StepRecord& rec);
  const AllModeRecord* find_record(const std::string& req_id) const;
  void update_slots(const model::Step& step);
  void execute_v1(StepCtx& ctx);
  void execute_v2(StepCtx& ctx);
  void execute_all(StepCtx& ctx);
  void fill_tables(std::span<const model::GroupBlockIds* const> rows);
  void fill_batch_tables(StepCtx& ctx, Tables gather);
  void fill_slot_tables();
  // `deferred`: the launch is a deferred postprocess (recorded as such).
  bool launch(StepCtx& ctx, model::LaunchKind kind, std::int32_t num_slots,
              model::RequestArrays arrays, Tables tables = Tables::batch, bool deferred = false);
  bool check_copy_sources(StepCtx& ctx, const std::vector<std::int32_t>& src_col,
                          const std::vector<std::int32_t>& dst_col,
                          const std::vector<std::int32_t>& token_bias,
                          const std::vector<SeedNote>& seed_note);
  bool forward(StepCtx& ctx, const std::vector<std::int32_t>& state_idx,
               const std::vector<std::int32_t>& num_accepted);
  bool forward_rows(StepCtx& ctx, std::span<const ForwardRow> rows); // false: a finding

  model::Layout layout_;
  RunnerOptions options_;
  bool keep_rows_ = true; // the fast structures: last_batch_ is kept
  std::vector<std::int64_t> conv_history_;
  // This step's block tables (by batch row) and the arrays of the launch in flight; the layout
  // is copied once. Its arenas are never touched (the launches only decide; the states are
  // states_'s): they are there, sparse, because a launch case holds its layout's arenas.
  model::LaunchCase launch_case_;
  std::unique_ptr<StateStore> states_;
  RequestRecords<RequestState> requests_; // erased when finished or preempted
  ListedRows<RequestState> listed_;       // this step's new and cached records, for its batch rows
  std::int64_t step_index_ = -1;          // of the step executed last
  std::vector<RequestState*> last_batch_; // its batch rows' records
  // V1
  MambaStateIdx mamba_state_idx_;
  // All mode
  AllModeRecords all_records_;
  // V2
  std::vector<Slot> slots_;
  std::vector<std::int32_t> free_slots_;
  std::unordered_map<std::string, std::int32_t> slot_of_;
};

} // namespace mc::oracle::engine
