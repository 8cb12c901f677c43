// One scheduler step as both sides of the engine simulation consume it (DESIGN.md, "Engine
// level"), and as a trace file records it.
//
// Modelled on vLLM's SchedulerOutput plus the sampling outcome of the step:
// - new requests carry their prompt and their whole first block table per mamba group (a
//   prefix hit shows as num_computed_tokens > 0 and nulls before the hit block);
// - cached requests carry the block ids appended to their rows this step, or, when
//   resumed, the whole new table that replaces the old row (REFERENCE.md 3);
// - scheduled entries are in batch order and carry the token ids at positions
//   num_computed .. num_computed + num_scheduled - 1, the last num_draft of them drafts;
// - num_accepted_tokens is the outcome: for a decode row 1..1+num_draft (a - 1 drafts
//   matched, plus the bonus token), for a prefill row 1 (neutral);
// - a request force-preempted by reset_prefix_cache never appears in preempted_req_ids, only
//   later among the resumed (REFERENCE.md 2, cleanup).
// - async scheduling (one step in flight, REFERENCE.md 3): planned_during names the step that
//   was running while this one was planned. The scheduler then counted that step's drafts as
//   accepted: a cached request's num_computed_tokens_optimistic is the count it planned from
//   (vLLM's CachedRequestData.num_computed_tokens under async scheduling), num_computed_tokens
//   the true count the runner starts from, once the step in flight reported its acceptance.
//   Tables were grown and stale blocks freed from the optimistic count; token ids are the real
//   ones (the runner fills vLLM's placeholders from the step in flight's samples).
// - key: a dense number of the request, the same in every step of one run (the oracle
//   scheduler's index of it), or -1; not part of a trace. A consumer may use it to find its
//   record of the request faster, never instead of req_id (oracle/engine/request_records.h).
// Plain data: aggregates with designated initialisers, no behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::model {

using RequestId = std::string;
// One block id list per mamba group, in group order.
using GroupBlockIds = std::vector<std::vector<std::int32_t>>;

struct NewRequestData {
  RequestId req_id;
  std::vector<std::int32_t> prompt_token_ids;
  GroupBlockIds block_ids;              // the whole table per group
  std::int32_t num_computed_tokens = 0; // from a prefix hit, a multiple of the mamba block size
  std::int32_t key = -1;
  // A recorded trace whose scheduler declares attention groups (SchedulerContract): their
  // whole tables, which share the pool with the mamba groups; empty otherwise.
  GroupBlockIds attention_block_ids;
};

struct CachedRequestData {
  RequestId req_id;
  bool resumed = false;                 // new_block_ids then replace the row
  GroupBlockIds new_block_ids;          // appended to the row (the whole row when resumed)
  std::int32_t num_computed_tokens = 0; // before this step
  // Async: the count the scheduler planned from when it differs (the step in flight's rejected
  // drafts included); absent when it equals num_computed_tokens.
  std::optional<std::int32_t> num_computed_tokens_optimistic;
  std::int32_t key = -1;
  // As NewRequestData's: appended to the attention groups' tables (the whole tables when
  // resumed); empty without attention groups.
  GroupBlockIds attention_block_ids;
  // A recorded trace: the request's whole table per mamba group as its block manager holds it
  // once this step was planned, nulls where it freed (empty: not recorded).
  GroupBlockIds held_block_ids;

  // The count the scheduler planned the step from (its tables and frees follow it).
  std::int32_t num_computed_planned() const {
    return num_computed_tokens_optimistic.value_or(num_computed_tokens);
  }
};

struct ScheduledRequest {
  RequestId req_id;
  std::int32_t num_scheduled_tokens = 0; // drafts included
  std::int32_t num_draft_tokens = 0;
  std::vector<std::int32_t> token_ids;  // num_scheduled_tokens ids, drafts last
  std::int32_t num_accepted_tokens = 1; // outcome of the step (see the header comment)
  std::int32_t key = -1;
};

// A whole-block copy the block manager asks of the runner for a partial-hash hit (vLLM's
// KVCacheBlockCopy, run by copy_kv_cache_blocks_inplace before the step's kernels): every state
// tensor of `group` at block `src` is copied to block `dst`.
struct BlockCopy {
  std::int32_t group = 0;
  std::int32_t src = 0;
  std::int32_t dst = 0;
  bool operator==(const BlockCopy&) const = default;
};

// A copy as a trace expects it: source and destination columns of the request's table.
struct ColumnCopy {
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  bool operator==(const ColumnCopy&) const = default;
};

// What a trace says must be true of one request after a step (FORMAT.md, `expect`), the way an
// inference engine's own tests state it. Each field is checked only when present; a copy that
// is present but empty (nullopt inside) expects no copy for the request.
struct RowExpectation {
  RequestId req_id;
  std::optional<std::optional<ColumnCopy>> pre_copy;  // precopy or batch_copy
  std::optional<std::optional<ColumnCopy>> post_copy; // postprocess or postprocess_align
  std::optional<std::int32_t> state_col;              // where the next step reads
  std::optional<std::int32_t> num_accepted;           // after the step
  // All mode with spec decode: the block the next step's metadata anchors its read at (vLLM's
  // block_idx_last_scheduled_token_prev_step).
  std::optional<std::int32_t> prev_step_anchor;
  // Per group, per column of the table after the step: 1 a block, 0 the null block.
  std::optional<std::vector<std::vector<std::int32_t>>> block_mask;
  // The same fields in vLLM's words (its e2e prefix-cache tests' StepAction): the scheduler's
  // table after the step's allocation, per group (1 a block, 0 null: freed and moved columns
  // are null there, where the runner's row keeps them); the copies as (the column of the
  // temporal state copied, that is the source column plus the token bias, destination
  // column); the pre-step copy's token bias (0 without one, as vLLM's fused buffers hold).
  std::optional<std::vector<std::vector<std::int32_t>>> kv_block_mask;
  std::optional<std::optional<ColumnCopy>> preprocess_copy_idx;
  std::optional<std::optional<ColumnCopy>> postprocess_copy_idx;
  std::optional<std::int32_t> token_bias;
};

struct Step {
  std::int64_t index = 0;
  // Async scheduling: the index of the step in flight while this one was planned; -1 when
  // every earlier step had completed (synchronous scheduling).
  std::int64_t planned_during = -1;
  std::vector<NewRequestData> new_requests;
  std::vector<CachedRequestData> cached_requests;
  std::vector<ScheduledRequest> scheduled; // batch order; every new and cached request once
  std::vector<RequestId> preempted_req_ids;
  std::vector<RequestId> finished_req_ids; // finished or aborted since the last step
  bool reset_prefix_cache = false;
  // Run first, before anything else of the step (partial-hash hits; empty otherwise). No block
  // is both a source and a destination, so the order does not matter (vLLM gathers every
  // source, then scatters).
  std::vector<BlockCopy> block_copies;
  std::vector<RowExpectation> expect; // from a trace of version 2; empty otherwise
};

} // namespace mc::model
