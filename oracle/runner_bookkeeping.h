// Host-level bookkeeping of the model runner around the kernels (REFERENCE.md 2).
//
// Written like the runner's Python: a dict of request id -> column (`mamba_state_idx`),
// explicit loops over the batch in order.
// - cleanup_mamba_state_idx drops finished, preempted AND resumed requests: a request
//   force-preempted by reset_prefix_cache comes back in resumed ids without ever being
//   preempted, and its stale column can point past its new, smaller table (class A, #35157).
// - preprocess_mamba (V1 align) advances every request's column to the block of its last
//   scheduled token and plans the copy prev -> curr with bias a - 1, resetting a to 1.
// - "all" mode: postprocess_mamba_all and the three block indices the attention metadata
//   builder derives for prefix caching.
#pragma once

#include "model/launch.h"

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::oracle {

using MambaStateIdx = std::unordered_map<std::string, std::int32_t>; // request id -> running column

// "all" mode with drafts: what postprocess_mamba_all keeps of a request's last decode with
// drafts, for the next step to find its state by.
struct AllModeRecord {
  std::int32_t block = 0;  // the block of its last scheduled token, max(0, (c + n - 1) // B)
  std::int32_t drafts = 0; // d of its 1 + d tokens (a == 1 + d: every draft was accepted)
  bool operator==(const AllModeRecord&) const = default;
};
using AllModeRecords = std::unordered_map<std::string, AllModeRecord>; // request id -> record

// `map` is mamba_state_idx or all mode's records.
template <class Map>
void cleanup_mamba_state_idx(const std::vector<std::string>& finished_req_ids,
                             const std::vector<std::string>& preempted_req_ids,
                             const std::vector<std::string>& resumed_req_ids, Map& map) {
  for (const auto* ids : {&finished_req_ids, &preempted_req_ids, &resumed_req_ids})
    for (const std::string& req_id : *ids)
      map.erase(req_id);
}

// One request of the batch, in batch order.
struct BatchRequest {
  std::string req_id;
  std::int32_t num_computed_tokens = 0;
  std::int32_t num_scheduled_tokens = 0; // drafts included
  std::int32_t num_accepted_tokens = 1;  // a, from the previous step
  std::int32_t num_draft_tokens = 0;     // of this step (postprocess_mamba_all)
};

// The request ids of one scheduler output that cleanup reads.
struct StepRequestIds {
  std::vector<std::string> finished;
  std::vector<std::string> preempted;
  std::vector<std::string> resumed;
};

// Per batch row, the inputs of a batch_copy (or V1 fused precopy) launch, named as in
// model::RequestArrays, and a after the step's resets. A row copies iff src_col >= 0 and
// src_col != state_idx; token_bias is a - 1 with a as it came in.
struct PreprocessPlan {
  std::vector<std::int32_t> src_col;      // prev column (-1: fresh, no copy)
  std::vector<std::int32_t> state_idx;    // curr column, also stored in mamba_state_idx
  std::vector<std::int32_t> token_bias;   // a - 1
  std::vector<std::int32_t> num_accepted; // a, reset to 1 where a copy is planned
  // 1 where no entry survived cleanup, so src_col was derived from num_computed (0: the
  // request's entry of its last step). Only explains a wrong source; decides nothing.
  std::vector<std::uint8_t> derived;
};

// V1 preprocess_mamba: cleanup, then per request prev -> curr (see the header comment).
PreprocessPlan preprocess_mamba(const StepRequestIds& step, std::span<const BatchRequest> batch,
                                std::int32_t block_size, std::int32_t num_speculative_blocks,
                                MambaStateIdx& mamba_state_idx);

// The arrays vLLM's V1 runner stages for its fused pre-copy (precopy_v1, no idx_mapping):
// state_idx = curr for every row; src_col = prev and token_bias = a - 1 where the row copies,
// src_col = -1 and token_bias = 0 on every other row.
model::RequestArrays fused_precopy_inputs(const PreprocessPlan& plan);

// "all" mode with spec decode: per request, record the block of the last scheduled token,
// max(0, (c + s - 1) // B), and the drafts, after a decode with drafts; drop the entry after
// any other step. No-op without spec decode. vLLM (6a391a9, #41233) records only after a full
// decode (all num_spec drafts, keyed on the query length 1 + num_spec), so after a decode
// with fewer drafts that rejected one its next step reads where no state of its count lies:
// the runner mutant all_record_full_decodes_only (model/FORWARD.md).
void postprocess_mamba_all(std::span<const BatchRequest> batch, std::int32_t block_size,
                           std::int32_t num_spec_tokens, AllModeRecords& records);

// "all" mode with spec decode: the block the metadata builder anchors a request's read at,
// block_idx_last_scheduled_token_prev_step: its record's block, else the fallback
// max((c - 1) // B, 0), the block of the last computed token.
std::int32_t all_mode_anchor(const AllModeRecord* record, std::int32_t num_computed,
                             std::int32_t block_size);

// "all" mode with spec decode: the column the forward reads a request's initial state from,
// given its anchor. At a record, the decode left the state after all its 1 + d tokens in the
// record's own block and the state after its first a tokens (a < 1 + d) a columns after it
// (model/FORWARD.md), so the column is anchor + a unless every draft was accepted; without
// one, the anchor.
std::int32_t all_mode_read_column(const AllModeRecord* record, std::int32_t anchor,
                                  std::int32_t num_accepted);

// "all" mode: per request, the block of the last computed token (clamped >= 0), of the first
// scheduled token, and of the last scheduled token (clamped >= 0; a padded row has seq_len 0).
struct PrefixCachingBlockIndices {
  std::vector<std::int32_t> last_computed;
  std::vector<std::int32_t> first_scheduled;
  std::vector<std::int32_t> last_scheduled;
};

PrefixCachingBlockIndices
compute_prefix_caching_block_indices(std::span<const std::int32_t> num_computed_tokens,
                                     std::span<const std::int32_t> seq_lens,
                                     std::int32_t mamba_block_size);

} // namespace mc::oracle
