// The V2 flow (REFERENCE.md 2): per-request arrays by slot, block-table rows by batch row (or
// by slot, #55506), idx_mapping between them; slots are reused by later requests. A new or resumed
// request's state_idx is seeded as (num_computed - 1) // B with the MAMBA block size (the attention
// block size here was #53142, reachable as a mutation).
#include "oracle/engine/runner.h"
#include "oracle/engine/runner_step.h"

namespace mc::oracle::engine {

void OracleRunner::update_slots(const model::Step& step) {
  auto release = [this](const std::string& id) {
    const auto it = slot_of_.find(id);
    if (it == slot_of_.end()) return;
    slots_[static_cast<std::size_t>(it->second)] = Slot{};
    free_slots_.push_back(it->second);
    slot_of_.erase(it);
  };
  for (const auto* departed : {&step.finished_req_ids, &step.preempted_req_ids})
    for (const auto& id : *departed)
      release(id);
  for (Slot& s : slots_)
    s.reseeded = false;
  const std::int32_t divisor = layout_.config.mamba_block_size;
  auto seed = [&](const std::string& id, std::int32_t num_computed) {
    auto it = slot_of_.find(id); // a force-preempted request still holds its slot
    if (it == slot_of_.end()) {
      std::int32_t slot = static_cast<std::int32_t>(slots_.size());
      if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
      } else {
        slots_.emplace_back();
      }
      it = slot_of_.emplace(id, slot).first;
    }
    slots_[static_cast<std::size_t>(it->second)] =
        Slot{.req_id = id,
             .state_idx = static_cast<std::int32_t>(model::floor_div(num_computed - 1, divisor)),
             .num_accepted = 1,
             .num_computed = num_computed,
             .reseeded = true};
  };
  for (const model::NewRequestData& n : step.new_requests)
    seed(n.req_id, n.num_computed_tokens);
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed) seed(c.req_id, c.num_computed_tokens);
}

model::RequestArrays OracleRunner::slot_arrays() const {
  model::RequestArrays a;
  for (const Slot& s : slots_) {
    a.state_idx.push_back(s.state_idx);
    a.num_accepted.push_back(s.num_accepted);
    a.num_computed.push_back(s.num_computed);
    a.src_col.push_back(s.src_col);
    a.token_bias.push_back(s.token_bias);
  }
  return a;
}

void OracleRunner::store_slot_arrays(const model::RequestArrays& a) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].state_idx = a.state_idx[i];
    slots_[i].num_accepted = a.num_accepted[i];
    if (!a.src_col.empty()) slots_[i].src_col = a.src_col[i];
    if (!a.token_bias.empty()) slots_[i].token_bias = a.token_bias[i];
  }
}

void OracleRunner::execute_v2(StepCtx& ctx) {
  const model::Step& step = ctx.step;
  const auto n = static_cast<std::int32_t>(step.scheduled.size());
  const auto num_slots = static_cast<std::int32_t>(slots_.size());
  std::vector<std::int32_t> idx_mapping;
  std::vector<std::int32_t> query_start_loc{0};
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    const std::int32_t slot = slot_of_.at(s.req_id);
    ctx.state[b]->slot = slot;
    idx_mapping.push_back(slot);
    query_start_loc.push_back(query_start_loc.back() + s.num_scheduled_tokens);
    Slot& st = slots_[static_cast<std::size_t>(slot)];
    st.num_computed = ctx.num_computed[b];
    ctx.seed_note.push_back(
        {.origin = st.reseeded ? SeedNote::Origin::seeded : SeedNote::Origin::kept_slot,
         .num_computed = st.num_computed,
         .divisor = layout_.config.mamba_block_size,
         .state_idx = st.state_idx});
  }
  if (n == 0) return;
  model::RequestArrays pre = slot_arrays();
  pre.idx_mapping = idx_mapping;
  pre.query_start_loc = query_start_loc;
  if (!launch(ctx, model::LaunchKind::preprocess_align, num_slots, std::move(pre))) return;
  store_slot_arrays(ctx.rec.launches.back().requests);
  std::vector<std::int32_t> src, dst, bias, a;
  for (const std::int32_t slot : idx_mapping) {
    const Slot& st = slots_[static_cast<std::size_t>(slot)];
    src.push_back(st.src_col);
    dst.push_back(st.state_idx);
    bias.push_back(st.token_bias);
    a.push_back(st.num_accepted);
  }
  if (!check_copy_sources(ctx, src, dst, bias, ctx.seed_note)) return;
  bool any_copy = false;
  for (std::size_t b = 0; b < src.size(); ++b)
    any_copy = any_copy || (src[b] >= 0 && src[b] != dst[b]);
  const bool slot_tables = options_.v2_table_rows == model::V2TableRows::slot;
  if (any_copy) {
    model::RequestArrays copy = slot_arrays();
    copy.idx_mapping = idx_mapping;
    copy.num_accepted.clear();
    copy.num_computed.clear();
    if (!launch(ctx,
                slot_tables ? model::LaunchKind::precopy_slot_tables : model::LaunchKind::precopy,
                num_slots, std::move(copy), slot_tables ? Tables::slots : Tables::batch))
      return;
  }
  if (!forward(ctx, dst, a)) return;
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    Slot& st = slots_[static_cast<std::size_t>(idx_mapping[b])];
    st.num_accepted = step.scheduled[b].num_accepted_tokens;
    st.num_computed = ctx.state[b]->next_computed;
  }
  if (layout_.config.num_spec_tokens == 0) return;
  model::RequestArrays post = slot_arrays();
  post.idx_mapping = idx_mapping;
  post.new_num_computed = post.num_computed;
  post.num_computed.clear();
  post.src_col.clear();
  post.token_bias.clear();
  // Deferred, the postprocess still has this step's idx_mapping and slot arrays; only tables
  // gathered in batch order have changed order since.
  const bool deferred = options_.deferred_postprocess;
  const Tables tables = slot_tables ? Tables::slots
                        : deferred  ? Tables::deferred_batch
                                    : Tables::batch;
  if (!launch(ctx,
              slot_tables ? model::LaunchKind::postprocess_align_slot_tables
                          : model::LaunchKind::postprocess_align,
              num_slots, std::move(post), tables, deferred))
    return;
  store_slot_arrays(ctx.rec.launches.back().requests);
}

} // namespace mc::oracle::engine
