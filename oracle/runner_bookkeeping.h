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
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::oracle {

using MambaStateIdx = std::unordered_map<std::string, std::int32_t>; // request id -> running column

void cleanup_mamba_state_idx(const std::vector<std::string>& finished_req_ids,
                             const std::vector<std::string>& preempted_req_ids,
                             const std::vector<std::string>& resumed_req_ids,
                             MambaStateIdx& mamba_state_idx);

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
// max(0, (c + s - 1) // B), after a full decode, else drop the entry. No-op without drafts.
// A full decode is a decode row with all num_spec drafts. vLLM keys on the query length alone
// (1 + num_spec tokens) because its metadata builder may also run a prefill chunk of that
// length through the decode kernels; here a chunk is always a prefill (model/FORWARD.md), and
// a prefill leaves its state where a step without a record reads.
void postprocess_mamba_all(std::span<const BatchRequest> batch, std::int32_t block_size,
                           std::int32_t num_spec_tokens, MambaStateIdx& mamba_state_idx);

// "all" mode with spec decode: the column the forward reads a request's initial state from.
// The metadata builder anchors it at the request's record (the last scheduled block of its
// last step, a full decode) when there is one, else at the block of the last computed token
// (`last_computed_col`). At a record, the decode left the state after all its tokens in the
// record's own block and the state after its first a tokens (a < 1 + num_spec) a columns after
// it (model/FORWARD.md), so the column is record + a unless every draft was accepted.
std::int32_t all_mode_read_column(std::optional<std::int32_t> record, std::int32_t num_accepted,
                                  std::int32_t num_spec_tokens, std::int32_t last_computed_col);

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
