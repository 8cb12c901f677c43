// EngineRunner: slots, rows, committed tokens and the per-step flow (engine_runner.h).
#include "gpu/engine/engine_runner.h"
#include "gpu/engine/runner_batch.h"

#include "model/errors.h"

#include <algorithm>
#include <optional>

namespace mc::gpu::engine {

EngineRunner::EngineRunner(const model::Layout& layout, const RunnerOptions& options,
                           model::Backend kind, ExecutorSource* external)
    : layout_(layout), options_(options), decisions_(make_runner_decisions(options.mutant)),
      executor_(external != nullptr ? external->make(layout)
                                    : make_executor(kind, layout, options.kernel_mutant)),
      metadata_builder_(layout.config, layout.num_groups(), *decisions_) {
  launch_case_.layout = layout;
  for (const model::StateTensor& t : layout.tensors)
    if (t.kind() != model::StateKind::temporal)
      conv_width_max_ =
          std::max(conv_width_max_, static_cast<std::int32_t>(t.shape.conv_state_len));
}

std::int32_t EngineRunner::slot_of(const std::string& req_id) const {
  const auto it = slot_index_.find(req_id);
  MC_ASSERT(it != slot_index_.end());
  return it->second;
}

// The slot of a new or resumed request: its own if it still holds one (force-preempted),
// else the last freed one, else a new one at the end (V2 reuse order).
std::int32_t EngineRunner::take_slot(const std::string& req_id) {
  const auto it = slot_index_.find(req_id);
  std::int32_t slot = 0;
  if (it != slot_index_.end()) {
    slot = it->second;
  } else if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::int32_t>(slots_.size());
    slots_.emplace_back();
  }
  slot_index_[req_id] = slot;
  return slot;
}

void EngineRunner::release(const std::string& req_id) {
  const auto it = slot_index_.find(req_id);
  if (it == slot_index_.end()) return;
  Request& r = slots_[static_cast<std::size_t>(it->second)];
  if (decisions_->keeps_slot_arrays(SlotHandover::released)) {
    r.req_id.clear(); // the arrays stay as the occupant left them
  } else {
    r = Request{};
  }
  free_slots_.push_back(it->second);
  slot_index_.erase(it);
}

// The column a request starts from when it has none: (c - 1) // B with Python floor division
// (-1 for a fresh request), from the computed count after the prefix hit.
std::int32_t EngineRunner::prev_column(std::int32_t c, bool resumed) const {
  return decisions_->prev_column(decisions_->prev_column_computed(c, resumed),
                                 decisions_->prev_column_block_size(layout_.config));
}

// A new or resumed request's slot entry: V1 starts without a column (prev is computed in the
// step), V2 seeds it with prev_column; the accepted count starts at 1 (no entry).
void EngineRunner::seed(const std::string& id, const model::GroupBlockIds& row, std::int32_t c,
                        bool resumed) {
  const bool kept_slot = slot_index_.contains(id); // force-preempted: never released
  const bool reused_slot = !kept_slot && !free_slots_.empty();
  SlotHandover handover = SlotHandover::fresh;
  if (kept_slot && resumed) handover = SlotHandover::kept_by_resumed;
  if (reused_slot) handover = SlotHandover::reused;
  const std::int32_t slot = take_slot(id);
  Request& r = slots_[static_cast<std::size_t>(slot)];
  const Request old = r;
  const bool v2 = options_.flavour == model::RunnerFlavour::v2;
  r = Request{.req_id = id,
              .row = row,
              .state_idx = v2 ? prev_column(c, resumed) : -1,
              .num_computed = c,
              .resumed = resumed};
  if (decisions_->keeps_slot_arrays(handover)) { // all mode's record lives in the same dict
    r.state_idx = old.state_idx;
    r.num_accepted = old.num_accepted;
    r.has_accepted = old.has_accepted;
    r.all_record = old.all_record;
  }
  if (const std::optional<std::int32_t> a = decisions_->accepted_at_seed(id, resumed)) {
    r.num_accepted = *a;
    r.has_accepted = true;
  }
}

// Rows of the step: finished and preempted requests leave; new requests and resumed ones get
// a fresh slot entry (V2 seeds state_idx with (c - 1) // B, the MAMBA block size); cached rows
// grow by their new block ids.
void EngineRunner::apply_rows(const model::Step& step) {
  for (const auto& id : step.finished_req_ids) {
    release(id);
    truth_.erase(id);
    prompt_len_.erase(id);
  }
  for (const auto& id : step.preempted_req_ids) {
    const auto it = slot_index_.find(id);
    if (it != slot_index_.end())
      decisions_->preempted(id, slots_[static_cast<std::size_t>(it->second)].num_accepted);
    release(id);
  }
  for (const model::NewRequestData& n : step.new_requests) {
    seed(n.req_id, n.block_ids, n.num_computed_tokens, false);
    truth_[n.req_id] = n.prompt_token_ids;
    prompt_len_[n.req_id] = static_cast<std::int32_t>(n.prompt_token_ids.size());
  }
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) {
      seed(c.req_id, c.new_block_ids, c.num_computed_tokens, true);
      continue;
    }
    Request& r = slots_[static_cast<std::size_t>(slot_of(c.req_id))];
    r.num_computed = c.num_computed_tokens;
    r.resumed = false;
    MC_ASSERT(r.row.size() == c.new_block_ids.size());
    for (std::size_t g = 0; g < r.row.size(); ++g)
      r.row[g].insert(r.row[g].end(), c.new_block_ids[g].begin(), c.new_block_ids[g].end());
  }
}

// Tables whose row r is rows[r] (pads where it is null, empty or short), int32 rows with the
// row stride of the options.
model::BlockTables
EngineRunner::make_tables(const std::vector<const model::GroupBlockIds*>& rows) const {
  std::int32_t width = 1;
  for (const model::GroupBlockIds* row : rows)
    if (row != nullptr)
      for (const auto& ids : *row)
        width = std::max(width, static_cast<std::int32_t>(ids.size()));
  const auto num_rows = static_cast<std::int32_t>(rows.size());
  model::BlockTables tables;
  for (std::int32_t g = 0; g < layout_.num_groups(); ++g) {
    model::BlockTable t =
        model::BlockTable::make(num_rows, width, width + options_.row_stride_extra);
    for (std::int32_t r = 0; r < num_rows; ++r) {
      const model::GroupBlockIds* row = rows[static_cast<std::size_t>(r)];
      if (row == nullptr || row->empty()) continue; // a free slot: pads
      const auto& ids = (*row)[static_cast<std::size_t>(g)];
      std::copy(ids.begin(), ids.end(), t.block_ids.begin() + std::int64_t{r} * t.row_stride);
    }
    tables.groups.push_back(std::move(t));
  }
  return tables;
}

model::BlockTables EngineRunner::tables_for(const Batch& batch, Tables tables) const {
  std::vector<const model::GroupBlockIds*> rows;
  if (tables == Tables::slots) {
    for (const Request& r : slots_) // a free slot's row is empty: pads
      rows.push_back(&r.row);
    return make_tables(rows);
  }
  const auto n = static_cast<std::int32_t>(batch.slot.size());
  const std::vector<std::int32_t> order = tables == Tables::deferred_batch
                                              ? model::deferred_gather_order(n)
                                              : std::vector<std::int32_t>{};
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t b = order.empty() ? i : order[static_cast<std::size_t>(i)];
    rows.push_back(&slots_[static_cast<std::size_t>(batch.slot[static_cast<std::size_t>(b)])].row);
  }
  return make_tables(rows);
}

bool EngineRunner::launch(StepRecord& rec, const Batch& batch, model::LaunchKind kind,
                          std::int32_t num_slots, model::RequestArrays arrays, Tables tables,
                          bool deferred) {
  launch_case_.kind = kind;
  launch_case_.num_reqs = static_cast<std::int32_t>(batch.slot.size());
  launch_case_.num_slots = num_slots;
  launch_case_.block_tables = tables_for(batch, tables);
  launch_case_.requests = std::move(arrays);
  model::LaunchResult result;
  try {
    result = executor_->launch(launch_case_);
  } catch (const model::InputError& e) {
    rec.stopped = true;
    rec.rejected = e.what();
    return false;
  }
  rec.launches.push_back({.kind = kind,
                          .status = result.status,
                          .unsupported_reason = std::move(result.unsupported_reason),
                          .decisions = std::move(result.decisions),
                          .requests = std::move(result.requests),
                          .deferred = deferred,
                          .decisions_recorded = executor_->records_decisions()});
  rec.stopped = result.status == model::LaunchStatus::unsupported;
  return !rec.stopped;
}

StepRecord EngineRunner::execute(const model::Step& step) {
  StepRecord rec{.step = step.index};
  if (!step.block_copies.empty() && decisions_->runs_block_copies())
    executor_->copy_blocks(step.block_copies);
  apply_rows(step);
  Batch batch{.step = &step};
  for (const model::ScheduledRequest& s : step.scheduled) {
    const std::int32_t slot = slot_of(s.req_id);
    batch.slot.push_back(slot);
    batch.num_computed.push_back(slots_[static_cast<std::size_t>(slot)].num_computed);
  }
  if (layout_.config.mode == model::CacheMode::all) {
    execute_all(rec, batch);
  } else if (options_.flavour == model::RunnerFlavour::v1) {
    execute_v1(rec, batch);
  } else {
    execute_v2(rec, batch);
  }
  if (!rec.stopped) commit_tokens(step, batch);
  return rec;
}

void EngineRunner::execute_all(StepRecord& rec, const Batch& batch) {
  const model::Step& step = *batch.step;
  std::vector<std::int32_t> accepted;
  std::vector<AllModeRecord> record;
  for (const std::int32_t slot : batch.slot) {
    const Request& r = slots_[static_cast<std::size_t>(slot)];
    accepted.push_back(r.num_accepted);
    record.push_back(r.all_record);
  }
  run_forward(rec, batch, accepted, record);
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    Request& r = slots_[static_cast<std::size_t>(batch.slot[b])];
    r.all_record = decisions_
                       ->all_mode_record(batch.num_computed[b], s.num_scheduled_tokens,
                                         s.num_draft_tokens, layout_.config)
                       .value_or(AllModeRecord{});
    r.num_accepted = s.num_draft_tokens > 0 ? s.num_accepted_tokens : 1;
  }
}

// After the step: the committed tokens (a decode keeps its accepted ones, a prefill all) and
// the computed count the next step starts from.
void EngineRunner::commit_tokens(const model::Step& step, const Batch& batch) {
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    const std::int32_t c = batch.num_computed[b];
    const std::int32_t kept =
        s.num_draft_tokens > 0 ? s.num_accepted_tokens : s.num_scheduled_tokens;
    // Positions c .. c + kept - 1 become committed; the prompt beyond them stays known (a
    // prefix hit after a preemption can restore more than this request computed itself).
    std::vector<std::int32_t>& truth = truth_.at(s.req_id);
    MC_ASSERT(static_cast<std::int32_t>(truth.size()) >= c);
    if (truth.size() < static_cast<std::size_t>(c + kept))
      truth.resize(static_cast<std::size_t>(c + kept));
    std::copy(s.token_ids.begin(), s.token_ids.begin() + kept, truth.begin() + c);
    slots_[static_cast<std::size_t>(batch.slot[b])].num_computed = c + kept;
  }
}

} // namespace mc::gpu::engine
