// The per-step flows of EngineRunner at array level: V1 (cleanup, prev/curr columns with
// Python floor division, the copy launch: batch_copy, precopy or vLLM's fused precopy_v1,
// postprocess) and V2 (slot arrays, preprocess_align, precopy, postprocess_align, with tables
// by batch row or by slot), REFERENCE.md 2 and model/LAUNCH_KINDS.md.
#include "gpu/engine/engine_runner.h"
#include "gpu/engine/runner_batch.h"

namespace mc::gpu::engine {

namespace {

bool any_row_copies(const std::vector<std::int32_t>& src, const std::vector<std::int32_t>& dst) {
  for (std::size_t b = 0; b < src.size(); ++b)
    if (src[b] >= 0 && src[b] != dst[b]) return true;
  return false;
}

} // namespace

void EngineRunner::execute_v1(StepRecord& rec, const Batch& batch) {
  const model::Step& step = *batch.step;
  // Cleanup happened in apply_rows: finished and preempted requests lost their slot, resumed
  // ones were reseeded (no column, no accepted count). The reset of a to 1 where a row copies
  // only matters to what the forward reads, which the oracle checks.
  condense_v1(batch);
  const std::int32_t B = layout_.config.mamba_block_size;
  const auto n = static_cast<std::int32_t>(batch.slot.size());
  std::vector<std::int32_t> src(static_cast<std::size_t>(n)), dst(src), bias(src);
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    Request& r = slots_[static_cast<std::size_t>(batch.slot[b])];
    const model::ScheduledRequest& s = step.scheduled[b];
    const std::int32_t c = batch.num_computed[b];
    // prev column -> curr column with bias a - 1 (a: the count kept from the last step, else 1).
    src[b] = r.state_idx >= 0 ? r.state_idx : prev_column(c, r.resumed);
    dst[b] = decisions_->curr_column(c + s.num_scheduled_tokens, B);
    bias[b] = (r.has_accepted ? r.num_accepted : 1) - 1;
    r.state_idx = dst[b];
    r.resumed = false;
  }
  if (options_.v1_copy_path == V1CopyPath::precopy_v1) {
    // vLLM's fused V1 pre-copy: one launch per step with rows, no idx_mapping; a row that
    // copies nothing is staged as src_col -1, bias 0.
    model::RequestArrays arrays{.state_idx = dst, .src_col = src, .token_bias = bias};
    for (std::size_t b = 0; b < src.size(); ++b) {
      if (src[b] >= 0 && src[b] != dst[b]) continue;
      arrays.src_col[b] = -1;
      arrays.token_bias[b] = 0;
    }
    if (n > 0 && !launch(rec, batch, model::LaunchKind::precopy_v1, n, std::move(arrays))) return;
  } else if (any_row_copies(src, dst)) {
    model::RequestArrays arrays{.state_idx = dst, .src_col = src, .token_bias = bias};
    model::LaunchKind kind = model::LaunchKind::batch_copy;
    if (options_.v1_copy_path == V1CopyPath::precopy) {
      kind = model::LaunchKind::precopy;
      arrays.idx_mapping = decisions_->precopy_idx_mapping(ArraysIndexedBy::batch_row, batch.slot);
    }
    if (!launch(rec, batch, kind, n, std::move(arrays))) return;
  }
  // a as the forward starts: reset to 1 where the row copied (the copy moved the state after
  // the accepted tokens to the window's first block at offset 0).
  std::vector<std::int32_t> accepted;
  for (std::size_t b = 0; b < batch.slot.size(); ++b)
    accepted.push_back(src[b] >= 0 && src[b] != dst[b] ? 1 : bias[b] + 1);
  run_forward(rec, batch, accepted);
  if (rec.forward_read) return;
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    Request& r = slots_[static_cast<std::size_t>(batch.slot[b])];
    r.num_accepted = step.scheduled[b].num_accepted_tokens;
    r.has_accepted = true;
  }
  postprocess_v1(rec, batch, dst);
  count_accepted(batch);
}

void EngineRunner::postprocess_v1(StepRecord& rec, const Batch& batch,
                                  const std::vector<std::int32_t>& dst) {
  const model::Step& step = *batch.step;
  const auto n = static_cast<std::int32_t>(batch.slot.size());
  if (layout_.config.num_spec_tokens == 0 || n == 0 || !decisions_->runs_postprocess(step)) return;
  model::RequestArrays post{.state_idx = dst, .num_computed = batch.num_computed};
  for (const model::ScheduledRequest& s : step.scheduled) {
    post.num_accepted.push_back(s.num_accepted_tokens);
    post.num_scheduled.push_back(s.num_scheduled_tokens);
    post.num_draft.push_back(s.num_draft_tokens);
  }
  post.num_accepted_out = post.num_accepted;
  if (!launch(rec, batch, model::LaunchKind::postprocess, n, std::move(post))) return;
  const model::RequestArrays& out = rec.launches.back().requests;
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    Request& r = slots_[static_cast<std::size_t>(batch.slot[b])];
    r.num_accepted =
        decisions_->accepted_after_postprocess(out.num_accepted_out[b], r.num_accepted);
  }
}

// The step's requests take their input-batch rows (model/input_batch.h). Under async
// scheduling this step was planned while the one before ran, whose accepted counts reach the
// host only now, after the condense, in the buffer that step wrote by its own rows.
void EngineRunner::condense_v1(const Batch& batch) {
  const model::Step& step = *batch.step;
  input_batch_.update(step.scheduled);
  if (step.planned_during < 0) return;
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    Request& r = slots_[static_cast<std::size_t>(batch.slot[b])];
    const std::int32_t written = counted_batch_.row_of(r.req_id);
    if (!r.has_accepted || r.resumed || written < 0) continue;
    const std::int32_t row = decisions_->accepted_count_row(written, input_batch_.row_of(r.req_id));
    if (row >= 0 && row < static_cast<std::int32_t>(counts_by_row_.size()))
      r.num_accepted = counts_by_row_[static_cast<std::size_t>(row)];
  }
}

// The counts a step leaves, by the input-batch rows it ran with.
void EngineRunner::count_accepted(const Batch& batch) {
  counted_batch_ = input_batch_;
  counts_by_row_.assign(static_cast<std::size_t>(input_batch_.size()), 1);
  for (const std::int32_t slot : batch.slot) {
    const Request& r = slots_[static_cast<std::size_t>(slot)];
    counts_by_row_[static_cast<std::size_t>(input_batch_.row_of(r.req_id))] = r.num_accepted;
  }
}

model::RequestArrays EngineRunner::slot_arrays() const {
  model::RequestArrays a;
  for (const Request& r : slots_) {
    a.state_idx.push_back(r.state_idx);
    a.num_accepted.push_back(r.num_accepted);
    a.num_computed.push_back(r.num_computed);
    a.src_col.push_back(r.src_col);
    a.token_bias.push_back(r.token_bias);
  }
  return a;
}

void EngineRunner::store_slot_arrays(const model::RequestArrays& a) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].state_idx = a.state_idx[i];
    slots_[i].num_accepted = a.num_accepted[i];
    if (!a.src_col.empty()) slots_[i].src_col = a.src_col[i];
    if (!a.token_bias.empty()) slots_[i].token_bias = a.token_bias[i];
  }
}

void EngineRunner::execute_v2(StepRecord& rec, const Batch& batch) {
  const model::Step& step = *batch.step;
  const auto n = static_cast<std::int32_t>(batch.slot.size());
  const auto num_slots = static_cast<std::int32_t>(slots_.size());
  if (n == 0) return;
  std::vector<std::int32_t> query_start_loc{0};
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    query_start_loc.push_back(query_start_loc.back() + step.scheduled[b].num_scheduled_tokens);
    slots_[static_cast<std::size_t>(batch.slot[b])].num_computed = batch.num_computed[b];
  }
  model::RequestArrays pre = slot_arrays();
  pre.idx_mapping = batch.slot;
  pre.query_start_loc = std::move(query_start_loc);
  if (!launch(rec, batch, model::LaunchKind::preprocess_align, num_slots, std::move(pre))) return;
  store_slot_arrays(rec.launches.back().requests);
  std::vector<std::int32_t> src, dst;
  for (const std::int32_t slot : batch.slot) {
    const Request& r = slots_[static_cast<std::size_t>(slot)];
    src.push_back(r.src_col);
    dst.push_back(r.state_idx);
  }
  const bool slot_tables = options_.v2_table_rows == model::V2TableRows::slot;
  if (any_row_copies(src, dst)) {
    model::RequestArrays copy = slot_arrays();
    copy.idx_mapping = decisions_->precopy_idx_mapping(ArraysIndexedBy::slot, batch.slot);
    decisions_->v2_precopy_sources(copy);
    copy.num_accepted.clear();
    copy.num_computed.clear();
    const model::LaunchKind kind =
        slot_tables ? model::LaunchKind::precopy_slot_tables : model::LaunchKind::precopy;
    if (!launch(rec, batch, kind, num_slots, std::move(copy),
                slot_tables ? Tables::slots : Tables::batch))
      return;
  }
  std::vector<std::int32_t> accepted;
  for (const std::int32_t slot : batch.slot)
    accepted.push_back(slots_[static_cast<std::size_t>(slot)].num_accepted);
  run_forward(rec, batch, accepted);
  if (rec.forward_read) return;
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    Request& r = slots_[static_cast<std::size_t>(batch.slot[b])];
    r.num_accepted = s.num_accepted_tokens;
    r.num_computed = batch.num_computed[b] +
                     (s.num_draft_tokens > 0 ? s.num_accepted_tokens : s.num_scheduled_tokens);
  }
  if (layout_.config.num_spec_tokens == 0 || !decisions_->runs_postprocess(step)) return;
  model::RequestArrays post = slot_arrays();
  post.idx_mapping = batch.slot;
  post.new_num_computed = post.num_computed;
  post.num_computed.clear();
  post.src_col.clear();
  post.token_bias.clear();
  const bool deferred = options_.deferred_postprocess;
  const model::LaunchKind kind = slot_tables ? model::LaunchKind::postprocess_align_slot_tables
                                             : model::LaunchKind::postprocess_align;
  const Tables tables = slot_tables ? Tables::slots
                        : deferred  ? Tables::deferred_batch
                                    : Tables::batch;
  if (!launch(rec, batch, kind, num_slots, std::move(post), tables, deferred)) return;
  model::RequestArrays out = rec.launches.back().requests;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    out.num_accepted[i] =
        decisions_->accepted_after_postprocess(out.num_accepted[i], slots_[i].num_accepted);
  store_slot_arrays(out);
}

} // namespace mc::gpu::engine
