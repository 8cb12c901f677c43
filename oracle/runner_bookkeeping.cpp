// The runner's host bookkeeping (runner_bookkeeping.h; REFERENCE.md 2), dict by dict.
#include "oracle/runner_bookkeeping.h"

#include "model/config.h"
#include "model/errors.h"

#include <algorithm>

namespace mc::oracle {

PreprocessPlan preprocess_mamba(const StepRequestIds& step, std::span<const BatchRequest> batch,
                                std::int32_t block_size, std::int32_t num_speculative_blocks,
                                MambaStateIdx& mamba_state_idx) {
  MC_ASSERT(block_size > 0);
  MC_ASSERT(num_speculative_blocks >= 0);
  cleanup_mamba_state_idx(step.finished, step.preempted, step.resumed, mamba_state_idx);
  PreprocessPlan plan;
  for (const BatchRequest& req : batch) {
    // One lookup for the read and the store below (the entry is set either way).
    const auto [entry, inserted] = mamba_state_idx.try_emplace(req.req_id, 0);
    std::int64_t prev_state_idx = 0;
    if (!inserted)
      prev_state_idx = entry->second;
    else // new or resumed: -1 when nothing is computed yet (Python floor division)
      prev_state_idx = model::floor_div(std::int64_t{req.num_computed_tokens} - 1, block_size);
    // The running state is saved in the first of the last 1 + nsb blocks of the table: with
    // B = 4, two drafts and [A, B, C] + 2 drafts, tokens fill blocks 0 and 1, so block 1.
    const std::int64_t num_blocks =
        model::cdiv(std::int64_t{req.num_computed_tokens} + req.num_scheduled_tokens, block_size) +
        num_speculative_blocks;
    const auto curr_state_idx = static_cast<std::int32_t>(num_blocks - 1 - num_speculative_blocks);
    entry->second = curr_state_idx;
    std::int32_t num_accepted = req.num_accepted_tokens;
    if (prev_state_idx != -1 && prev_state_idx != curr_state_idx) num_accepted = 1;
    plan.src_col.push_back(static_cast<std::int32_t>(prev_state_idx));
    plan.state_idx.push_back(curr_state_idx);
    plan.token_bias.push_back(req.num_accepted_tokens - 1);
    plan.num_accepted.push_back(num_accepted);
    plan.derived.push_back(inserted ? 1 : 0);
  }
  return plan;
}

model::RequestArrays fused_precopy_inputs(const PreprocessPlan& plan) {
  MC_ASSERT(plan.src_col.size() == plan.state_idx.size());
  MC_ASSERT(plan.token_bias.size() == plan.state_idx.size());
  model::RequestArrays arrays{.state_idx = plan.state_idx};
  for (std::size_t i = 0; i < plan.state_idx.size(); ++i) {
    const std::int32_t prev = plan.src_col[i];
    const bool copies = prev != -1 && prev != plan.state_idx[i]; // preprocess_mamba's condition
    arrays.src_col.push_back(copies ? prev : -1);
    arrays.token_bias.push_back(copies ? plan.token_bias[i] : 0);
  }
  return arrays;
}

void postprocess_mamba_all(std::span<const BatchRequest> batch, std::int32_t block_size,
                           std::int32_t num_spec_tokens, AllModeRecords& records) {
  MC_ASSERT(block_size > 0);
  if (num_spec_tokens <= 0) return;
  for (const BatchRequest& req : batch) {
    if (req.num_draft_tokens > 0) {
      MC_ASSERT(req.num_draft_tokens <= num_spec_tokens);
      MC_ASSERT(req.num_scheduled_tokens == 1 + req.num_draft_tokens);
      const std::int64_t seq_len = std::int64_t{req.num_computed_tokens} + req.num_scheduled_tokens;
      records[req.req_id] = {.block = static_cast<std::int32_t>(std::max<std::int64_t>(
                                 0, model::floor_div(seq_len - 1, block_size))),
                             .drafts = req.num_draft_tokens};
    } else {
      records.erase(req.req_id);
    }
  }
}

std::int32_t all_mode_anchor(const AllModeRecord* record, std::int32_t num_computed,
                             std::int32_t block_size) {
  MC_ASSERT(block_size > 0);
  if (record != nullptr) return record->block;
  return static_cast<std::int32_t>(
      std::max<std::int64_t>(model::floor_div(std::int64_t{num_computed} - 1, block_size), 0));
}

std::int32_t all_mode_read_column(const AllModeRecord* record, std::int32_t anchor,
                                  std::int32_t num_accepted) {
  MC_ASSERT(anchor >= 0);
  if (record == nullptr) return anchor;
  MC_ASSERT(num_accepted >= 1 && num_accepted <= 1 + record->drafts);
  return num_accepted == 1 + record->drafts ? anchor : anchor + num_accepted;
}

PrefixCachingBlockIndices
compute_prefix_caching_block_indices(std::span<const std::int32_t> num_computed_tokens,
                                     std::span<const std::int32_t> seq_lens,
                                     std::int32_t mamba_block_size) {
  MC_ASSERT(mamba_block_size > 0);
  MC_ASSERT(num_computed_tokens.size() == seq_lens.size());
  PrefixCachingBlockIndices out;
  for (std::size_t i = 0; i < seq_lens.size(); ++i) {
    const std::int64_t computed = num_computed_tokens[i];
    const std::int64_t last_computed = model::cdiv(computed, mamba_block_size) - 1;
    const std::int64_t first_scheduled = model::cdiv(computed + 1, mamba_block_size) - 1;
    const std::int64_t last_scheduled = model::cdiv(seq_lens[i], mamba_block_size) - 1;
    out.last_computed.push_back(
        static_cast<std::int32_t>(std::max<std::int64_t>(last_computed, 0)));
    out.first_scheduled.push_back(static_cast<std::int32_t>(first_scheduled));
    out.last_scheduled.push_back(
        static_cast<std::int32_t>(std::max<std::int64_t>(last_scheduled, 0)));
  }
  return out;
}

} // namespace mc::oracle
