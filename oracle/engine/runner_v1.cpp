// execute(): the per-step flow, V1 align (REFERENCE.md 2) and all mode (REFERENCE.md 2, 3).
#include "model/errors.h"
#include "oracle/engine/forward_metadata.h"
#include "oracle/engine/runner.h"
#include "oracle/engine/runner_step.h"

#include <numeric>

namespace mc::oracle::engine {

StepRecord OracleRunner::execute(const model::Step& step, const Ledger& ledger) {
  StepRecord rec{.step = step.index};
  update_rows(step);
  if (options_.flavour == model::RunnerFlavour::v2) update_slots(step);
  step_index_ = step.index;
  copy_blocks(step, rec);
  StepCtx ctx{.step = step, .ledger = ledger, .rec = rec};
  const std::size_t n = step.scheduled.size();
  ctx.num_computed.reserve(n);
  ctx.state.reserve(n);
  ctx.truth.reserve(n);
  for (std::size_t b = 0; b < n; ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    RequestState& st =
        listed_.next_row(s.req_id, [this, &s](const std::string& id) -> RequestState& {
          return state_of(id, s.key);
        });
    MC_ASSERT(st.scheduled_step == step.index); // new or cached in this very step
    const std::int32_t c = st.num_computed;
    ctx.num_computed.push_back(c);
    ctx.state.push_back(&st);
    ctx.truth.push_back(&ledger.row_truth(step, b)); // the ledger has begun this step
    st.next_computed =
        c + (s.num_draft_tokens > 0 ? s.num_accepted_tokens : s.num_scheduled_tokens);
  }
  if (keep_rows_) last_batch_ = ctx.state;
  if (layout_.config.mode == model::CacheMode::all)
    execute_all(ctx);
  else if (options_.flavour == model::RunnerFlavour::v1)
    execute_v1(ctx);
  else
    execute_v2(ctx);
  return rec;
}

bool OracleRunner::forward(StepCtx& ctx, const std::vector<std::int32_t>& state_idx,
                           const std::vector<std::int32_t>& num_accepted) {
  std::vector<ForwardRow> rows;
  rows.reserve(ctx.step.scheduled.size());
  for (std::size_t b = 0; b < ctx.step.scheduled.size(); ++b)
    rows.push_back({.scheduled = &ctx.step.scheduled[b],
                    .num_computed = ctx.num_computed[b],
                    .num_accepted = num_accepted[b],
                    .state_idx = state_idx[b],
                    .row = &ctx.state[b]->row,
                    .truth = ctx.truth[b]});
  return forward_rows(ctx, rows);
}

bool OracleRunner::forward_rows(StepCtx& ctx, std::span<const ForwardRow> rows) {
  const ForwardContext fctx{.layout = &layout_,
                            .states = states_.get(),
                            .step = ctx.step.index,
                            .log = &ctx.rec.access,
                            .bytes_checked = &ctx.rec.bytes_checked,
                            .conv_history = conv_history_};
  ctx.rec.metadata = derive_forward_metadata(layout_.config, rows);
  ctx.rec.finding = run_forward(fctx, rows);
  return !ctx.rec.finding;
}

void OracleRunner::execute_v1(StepCtx& ctx) {
  const model::Step& step = ctx.step;
  StepRequestIds ids{.finished = step.finished_req_ids, .preempted = step.preempted_req_ids};
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed) ids.resumed.push_back(c.req_id);
  // The a of finished and preempted requests went with their records (update_rows).
  for (const std::string& id : ids.resumed)
    state_of(id, -1).has_accepted = false;
  std::vector<BatchRequest> batch;
  batch.reserve(step.scheduled.size());
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    const RequestState& st = *ctx.state[b];
    batch.push_back({.req_id = s.req_id,
                     .num_computed_tokens = ctx.num_computed[b],
                     .num_scheduled_tokens = s.num_scheduled_tokens,
                     .num_accepted_tokens = st.has_accepted ? st.num_accepted : 1});
  }
  const std::int32_t B = layout_.config.mamba_block_size;
  const std::int32_t nsb = layout_.config.num_spec_blocks;
  PreprocessPlan plan = preprocess_mamba(ids, batch, B, nsb, mamba_state_idx_);
  ctx.seed_note.reserve(batch.size());
  for (std::size_t b = 0; b < batch.size(); ++b) {
    ctx.state[b]->state_idx = plan.state_idx[b]; // what mamba_state_idx_ now holds for the row
    ctx.seed_note.push_back(
        {.origin = plan.derived[b] != 0 ? SeedNote::Origin::derived : SeedNote::Origin::kept,
         .divisor = B});
  }
  if (!check_copy_sources(ctx, plan.src_col, plan.state_idx, plan.token_bias, ctx.seed_note))
    return;
  const auto n = static_cast<std::int32_t>(batch.size());
  bool any_copy = false;
  for (std::size_t b = 0; b < batch.size(); ++b)
    any_copy = any_copy || (plan.src_col[b] >= 0 && plan.src_col[b] != plan.state_idx[b]);
  if (options_.v1_copy_path == V1CopyPath::precopy_v1) {
    // vLLM's fused V1 path launches on every step with rows, whether or not one copies.
    if (n > 0 && !launch(ctx, model::LaunchKind::precopy_v1, n, fused_precopy_inputs(plan))) return;
  } else if (any_copy) {
    model::RequestArrays arrays{
        .state_idx = plan.state_idx, .src_col = plan.src_col, .token_bias = plan.token_bias};
    model::LaunchKind kind = model::LaunchKind::batch_copy;
    if (options_.v1_copy_path == V1CopyPath::precopy) {
      kind = model::LaunchKind::precopy;
      arrays.idx_mapping.resize(static_cast<std::size_t>(n));
      std::iota(arrays.idx_mapping.begin(), arrays.idx_mapping.end(), 0);
    }
    if (!launch(ctx, kind, n, std::move(arrays))) return;
  }
  if (!forward(ctx, plan.state_idx, plan.num_accepted)) return;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    ctx.state[b]->num_accepted = step.scheduled[b].num_accepted_tokens;
    ctx.state[b]->has_accepted = true;
  }
  if (layout_.config.num_spec_tokens == 0 || n == 0) return;
  model::RequestArrays post{.state_idx = plan.state_idx, .num_computed = ctx.num_computed};
  for (const model::ScheduledRequest& s : step.scheduled) {
    post.num_accepted.push_back(s.num_accepted_tokens);
    post.num_scheduled.push_back(s.num_scheduled_tokens);
    post.num_draft.push_back(s.num_draft_tokens);
  }
  post.num_accepted_out = post.num_accepted; // the runner initialises the output (LAUNCH_KINDS)
  if (!launch(ctx, model::LaunchKind::postprocess, n, std::move(post))) return;
  const model::RequestArrays& out = ctx.rec.launches.back().requests;
  for (std::size_t b = 0; b < batch.size(); ++b)
    ctx.state[b]->num_accepted = out.num_accepted_out[b];
}

// All mode: the forward at the blocks the attention metadata builder derives, read from the
// request's record when its last step was a decode with drafts, then postprocess_mamba_all
// keeps the records (REFERENCE.md 2 and 3, model/FORWARD.md). No launches.
void OracleRunner::execute_all(StepCtx& ctx) {
  const model::Step& step = ctx.step;
  std::vector<std::string> resumed;
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed) resumed.push_back(c.req_id);
  cleanup_mamba_state_idx(step.finished_req_ids, step.preempted_req_ids, resumed, all_records_);
  for (const std::string& id : resumed) // its a went with its old row; a fresh one is neutral
    state_of(id, -1).has_accepted = false;
  const std::int32_t B = layout_.config.mamba_block_size;
  const std::int32_t ns = layout_.config.num_spec_tokens;
  const std::size_t n = step.scheduled.size();
  std::vector<std::int32_t> seq_lens;
  seq_lens.reserve(n);
  for (std::size_t b = 0; b < n; ++b)
    seq_lens.push_back(ctx.num_computed[b] + step.scheduled[b].num_scheduled_tokens);
  const PrefixCachingBlockIndices idx =
      compute_prefix_caching_block_indices(ctx.num_computed, seq_lens, B);
  std::vector<ForwardRow> rows;
  rows.reserve(n);
  for (std::size_t b = 0; b < n; ++b) {
    const RequestState& st = *ctx.state[b];
    const AllModeRecord* record = find_record(step.scheduled[b].req_id);
    const std::int32_t a = st.has_accepted ? st.num_accepted : 1;
    const std::int32_t anchor = all_mode_anchor(record, ctx.num_computed[b], B);
    MC_ASSERT(ns > 0 || anchor == idx.last_computed[b]);
    rows.push_back({.scheduled = &step.scheduled[b],
                    .num_computed = ctx.num_computed[b],
                    .num_accepted = a,
                    .state_idx = all_mode_read_column(record, anchor, a),
                    .anchor = ns > 0 ? anchor : -1,
                    .last_scheduled_col = idx.last_scheduled[b],
                    .first_scheduled_col = idx.first_scheduled[b],
                    .row = &ctx.state[b]->row,
                    .truth = ctx.truth[b]});
  }
  if (!forward_rows(ctx, rows)) return;
  std::vector<BatchRequest> batch;
  batch.reserve(n);
  for (std::size_t b = 0; b < n; ++b)
    batch.push_back({.req_id = step.scheduled[b].req_id,
                     .num_computed_tokens = ctx.num_computed[b],
                     .num_scheduled_tokens = step.scheduled[b].num_scheduled_tokens,
                     .num_draft_tokens = step.scheduled[b].num_draft_tokens});
  postprocess_mamba_all(batch, B, ns, all_records_);
  // Where the next step reads: the record just kept, with this step's a, or the block of the
  // last token this step committed.
  for (std::size_t b = 0; b < n; ++b) {
    RequestState& st = *ctx.state[b];
    const model::ScheduledRequest& s = step.scheduled[b];
    st.num_accepted = s.num_draft_tokens > 0 ? s.num_accepted_tokens : 1;
    st.has_accepted = true;
    const AllModeRecord* record = find_record(s.req_id);
    const std::int32_t anchor = all_mode_anchor(record, st.next_computed, B);
    st.state_idx = all_mode_read_column(record, anchor, st.num_accepted);
    st.anchor = ns > 0 ? anchor : -1;
  }
}

const AllModeRecord* OracleRunner::find_record(const std::string& req_id) const {
  const auto it = all_records_.find(req_id);
  return it == all_records_.end() ? nullptr : &it->second;
}

OracleRunner::NextRead OracleRunner::next_read(const model::Step& step,
                                               std::size_t batch_row) const {
  MC_ASSERT(step.index == step_index_);
  MC_ASSERT(batch_row < step.scheduled.size());
  if (!keep_rows_) {
    const std::string& id = step.scheduled[batch_row].req_id;
    return {read_point(id), row(id)};
  }
  MC_ASSERT(last_batch_.size() == step.scheduled.size());
  const RequestState& st = *last_batch_[batch_row];
  if (layout_.config.mode == model::CacheMode::all)
    return {
        ReadPoint{.state_idx = st.state_idx, .num_accepted = st.num_accepted, .anchor = st.anchor},
        &st.row};
  if (options_.flavour == model::RunnerFlavour::v2) {
    const Slot& s = slots_[static_cast<std::size_t>(st.slot)];
    return {ReadPoint{.state_idx = s.state_idx, .num_accepted = s.num_accepted}, &st.row};
  }
  return {
      ReadPoint{.state_idx = st.state_idx, .num_accepted = st.has_accepted ? st.num_accepted : 1},
      &st.row};
}

std::optional<ReadPoint> OracleRunner::read_point(const std::string& req_id) const {
  const RequestState* st = requests_.find(req_id);
  if (st == nullptr || st->scheduled_step != step_index_) return std::nullopt;
  if (layout_.config.mode == model::CacheMode::all)
    return ReadPoint{
        .state_idx = st->state_idx, .num_accepted = st->num_accepted, .anchor = st->anchor};
  if (options_.flavour == model::RunnerFlavour::v2) {
    const Slot& s = slots_[static_cast<std::size_t>(slot_of_.at(req_id))];
    return ReadPoint{.state_idx = s.state_idx, .num_accepted = s.num_accepted};
  }
  return ReadPoint{.state_idx = mamba_state_idx_.at(req_id),
                   .num_accepted = st->has_accepted ? st->num_accepted : 1};
}

} // namespace mc::oracle::engine
