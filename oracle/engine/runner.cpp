#include "oracle/engine/runner.h"

#include "model/block_copy.h"
#include "oracle/engine/runner_step.h"

#include "model/block_table.h"
#include "model/conv_history.h"
#include "model/errors.h"
#include "model/runner_options.h"
#include "oracle/engine/state_io.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {

OracleRunner::OracleRunner(const model::Layout& layout, const RunnerOptions& options,
                           Structures structures)
    : layout_(layout), options_(options), keep_rows_(structures == Structures::fast),
      states_(make_state_store(layout, structures)), requests_(structures), listed_(structures) {
  launch_case_.layout = layout;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i)
    conv_history_.push_back(layout.tensors[i].kind() == model::StateKind::conv
                                ? model::conv_history_rows(layout, static_cast<std::int32_t>(i))
                                : 0);
  for (const model::ArenaSpec& a : layout.arenas)
    launch_case_.arenas.emplace_back(a.size_bytes());
  launch_case_.block_tables.groups.resize(static_cast<std::size_t>(layout.num_groups()));
}

const model::GroupBlockIds* OracleRunner::row(const std::string& req_id) const {
  const RequestState* st = requests_.find(req_id);
  return st == nullptr ? nullptr : &st->row;
}

void OracleRunner::update_rows(const model::Step& step) {
  for (const auto* departed : {&step.finished_req_ids, &step.preempted_req_ids})
    for (const auto& id : *departed)
      requests_.erase(id);
  listed_.clear();
  for (const model::NewRequestData& n : step.new_requests) {
    RequestState& st = requests_.emplace(n.req_id, n.key);
    listed_.add_new(n.req_id, st);
    st.row = n.block_ids;
    st.scheduled_step = step.index;
    st.num_computed = n.num_computed_tokens;
  }
  for (const model::CachedRequestData& c : step.cached_requests) {
    RequestState& st = c.resumed ? requests_.emplace(c.req_id, c.key) : state_of(c.req_id, c.key);
    listed_.add_cached(c.req_id, st);
    st.scheduled_step = step.index;
    st.num_computed = c.num_computed_tokens;
    if (c.resumed) {
      st.row = c.new_block_ids; // a fresh table replaces the old row
      continue;
    }
    MC_ASSERT(st.row.size() == c.new_block_ids.size());
    for (std::size_t g = 0; g < st.row.size(); ++g)
      st.row[g].insert(st.row[g].end(), c.new_block_ids[g].begin(), c.new_block_ids[g].end());
  }
}

// The block tables with `rows` as their rows, refilled in place: pads past each row's end
// (a null entry of `rows`: a row of pads), stride-gap fill past the width (as BlockTable::make
// lays them out).
void OracleRunner::fill_tables(std::span<const model::GroupBlockIds* const> rows) {
  std::int32_t width = 1;
  for (const model::GroupBlockIds* row : rows)
    if (row != nullptr)
      for (const auto& ids : *row)
        width = std::max(width, static_cast<std::int32_t>(ids.size()));
  const auto num_rows = static_cast<std::int32_t>(rows.size());
  const std::int32_t stride = width + options_.row_stride_extra;
  for (std::int32_t g = 0; g < layout_.num_groups(); ++g) {
    model::BlockTable& t = launch_case_.block_tables.groups[static_cast<std::size_t>(g)];
    t.num_rows = num_rows;
    t.row_width = width;
    t.row_stride = stride;
    t.block_ids.assign(static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(stride),
                       model::kStrideGapFill);
    for (std::int32_t r = 0; r < num_rows; ++r) {
      std::int32_t* out = &t.at(r, 0);
      const model::GroupBlockIds* row = rows[static_cast<std::size_t>(r)];
      const std::int32_t* end = out;
      if (row != nullptr) {
        const auto& ids = (*row)[static_cast<std::size_t>(g)];
        end = std::copy(ids.begin(), ids.end(), out);
      }
      std::fill(out + (end - out), out + width, model::kPadSlot);
    }
  }
}

// The step's rows in batch order, or (a deferred postprocess) in the order a later step
// gathered them.
void OracleRunner::fill_batch_tables(StepCtx& ctx, Tables gather) {
  const auto n = static_cast<std::int32_t>(ctx.state.size());
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  for (std::int32_t b = 0; b < n; ++b)
    order[static_cast<std::size_t>(b)] = b;
  if (gather == Tables::deferred_batch) order = model::deferred_gather_order(n);
  std::vector<const model::GroupBlockIds*> rows;
  rows.reserve(order.size());
  for (const std::int32_t b : order)
    rows.push_back(&ctx.state[static_cast<std::size_t>(b)]->row);
  fill_tables(rows);
}

// One row per slot: the row of the request holding it, pads for a free slot (never read).
void OracleRunner::fill_slot_tables() {
  std::vector<const model::GroupBlockIds*> rows;
  rows.reserve(slots_.size());
  for (const Slot& s : slots_) {
    const RequestState* st = s.req_id.empty() ? nullptr : requests_.find(s.req_id);
    rows.push_back(st == nullptr ? nullptr : &st->row);
  }
  fill_tables(rows);
}

// One launch through the oracle; its decisions become logged accesses.
bool OracleRunner::launch(StepCtx& ctx, model::LaunchKind kind, std::int32_t num_slots,
                          model::RequestArrays arrays, Tables tables, bool deferred) {
  launch_case_.kind = kind;
  launch_case_.num_reqs = static_cast<std::int32_t>(ctx.step.scheduled.size());
  launch_case_.num_slots = num_slots;
  MC_ASSERT((tables == Tables::slots) == model::tables_by_slot(kind));
  if (ctx.tables != tables) { // the rows do not change within a step
    if (tables == Tables::slots)
      fill_slot_tables();
    else
      fill_batch_tables(ctx, tables);
    ctx.tables = tables;
  }
  launch_case_.requests = std::move(arrays);
  model::LaunchResult result;
  try {
    // An InputError leaves the states untouched.
    result = run_launch_in_place(launch_case_, Copies::decide_only);
  } catch (const model::InputError& e) {
    ctx.rec.finding =
        make_finding(layout_, FindingKind::launch_rejected, ctx.step.index, "", -1, -1, -1,
                     fmt::format("{} launch: {}", to_string(kind), e.what()), "a valid launch");
    return false;
  }
  states_->apply_copies(result.decisions); // none when unsupported
  ctx.rec.access.copy_reads.reserve(ctx.rec.access.copy_reads.size() + result.decisions.size());
  ctx.rec.access.writes.reserve(ctx.rec.access.writes.size() + result.decisions.size());
  const std::string_view origin = to_string(kind);
  for (const model::CopyDecision& d : result.decisions) {
    const auto src_col = d.src_col + (layout_.tensors[static_cast<std::size_t>(d.tensor)].kind() ==
                                              model::StateKind::temporal
                                          ? d.token_bias
                                          : 0);
    ctx.rec.access.copy_reads.push_back(
        {d.batch_row, d.tensor, d.group, src_col, d.src_block_id, origin});
    ctx.rec.access.writes.push_back(
        {d.batch_row, d.tensor, d.group, d.dst_col, d.dst_block_id, origin});
  }
  ctx.rec.launches.push_back({.kind = kind,
                              .status = result.status,
                              .unsupported_reason = result.unsupported_reason,
                              .decisions = std::move(result.decisions),
                              .requests = launch_case_.requests,
                              .deferred = deferred});
  if (result.status == model::LaunchStatus::unsupported) {
    ctx.rec.finding = make_finding(layout_, FindingKind::unsupported_copy, ctx.step.index, "", -1,
                                   -1, -1, result.unsupported_reason, "");
    return false;
  }
  return true;
}

void OracleRunner::copy_blocks(const model::Step& step, StepRecord& rec) {
  if (step.block_copies.empty()) return;
  states_->copy_blocks(step.block_copies);
  for (const model::BlockCopy& c : step.block_copies)
    for (std::size_t i = 0; i < layout_.tensors.size(); ++i)
      if (layout_.tensors[i].group == c.group)
        rec.access.writes.push_back({.batch_row = -1,
                                     .tensor = static_cast<std::int32_t>(i),
                                     .group = c.group,
                                     .col = -1,
                                     .block_id = c.dst,
                                     .origin = "block_copy"});
}

} // namespace mc::oracle::engine
