#include "oracle/engine/runner.h"
#include "oracle/engine/runner_step.h"

#include "model/block_table.h"
#include "model/errors.h"
#include "oracle/engine/state_io.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {

OracleRunner::OracleRunner(const model::Layout& layout, const RunnerOptions& options)
    : layout_(layout), options_(options) {
  for (const model::ArenaSpec& a : layout.arenas) {
    arenas_.emplace_back(a.size_bytes());
    arenas_.back().poison(); // a byte nothing wrote shows
  }
  launch_case_.layout = layout;
}

const model::GroupBlockIds* OracleRunner::row(const std::string& req_id) const {
  const auto it = rows_.find(req_id);
  return it == rows_.end() ? nullptr : &it->second;
}

void OracleRunner::update_rows(const model::Step& step) {
  for (const auto& id : step.finished_req_ids)
    rows_.erase(id);
  for (const auto& id : step.preempted_req_ids)
    rows_.erase(id);
  for (const model::NewRequestData& n : step.new_requests)
    rows_[n.req_id] = n.block_ids;
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) {
      rows_[c.req_id] = c.new_block_ids; // a fresh table replaces the old row
      continue;
    }
    model::GroupBlockIds& row = rows_.at(c.req_id);
    MC_ASSERT(row.size() == c.new_block_ids.size());
    for (std::size_t g = 0; g < row.size(); ++g)
      row[g].insert(row[g].end(), c.new_block_ids[g].begin(), c.new_block_ids[g].end());
  }
  num_computed_.clear();
  for (const model::NewRequestData& n : step.new_requests)
    num_computed_[n.req_id] = n.num_computed_tokens;
  for (const model::CachedRequestData& c : step.cached_requests)
    num_computed_[c.req_id] = c.num_computed_tokens;
}

model::BlockTables OracleRunner::batch_tables(const model::Step& step) const {
  std::int32_t width = 1;
  for (const model::ScheduledRequest& s : step.scheduled)
    for (const auto& ids : rows_.at(s.req_id))
      width = std::max(width, static_cast<std::int32_t>(ids.size()));
  const auto num_rows = static_cast<std::int32_t>(step.scheduled.size());
  model::BlockTables tables;
  for (std::int32_t g = 0; g < layout_.num_groups(); ++g) {
    model::BlockTable t =
        model::BlockTable::make(num_rows, width, width + options_.row_stride_extra);
    for (std::int32_t b = 0; b < num_rows; ++b) {
      const auto& ids =
          rows_.at(step.scheduled[static_cast<std::size_t>(b)].req_id)[static_cast<std::size_t>(g)];
      for (std::size_t c = 0; c < ids.size(); ++c)
        t.at(b, static_cast<std::int32_t>(c)) = ids[c];
    }
    tables.groups.push_back(std::move(t));
  }
  return tables;
}

// One launch through the oracle; its decisions become logged accesses.
bool OracleRunner::launch(StepCtx& ctx, model::LaunchKind kind, std::int32_t num_slots,
                          model::RequestArrays arrays) {
  launch_case_.kind = kind;
  launch_case_.num_reqs = static_cast<std::int32_t>(ctx.step.scheduled.size());
  launch_case_.num_slots = num_slots;
  launch_case_.block_tables = batch_tables(ctx.step);
  launch_case_.requests = std::move(arrays);
  launch_case_.arenas = std::move(arenas_);
  model::LaunchResult result;
  try {
    result = run_launch(launch_case_);
  } catch (const model::InputError& e) {
    arenas_ = std::move(launch_case_.arenas);
    ctx.rec.finding =
        make_finding(layout_, FindingKind::launch_rejected, ctx.step.index, "", -1, -1, -1,
                     fmt::format("{} launch: {}", to_string(kind), e.what()), "a valid launch");
    return false;
  }
  arenas_ = std::move(result.arenas);
  for (const model::CopyDecision& d : result.decisions) {
    const std::string& id = ctx.step.scheduled[static_cast<std::size_t>(d.batch_row)].req_id;
    const auto src_col = d.src_col + (layout_.tensors[static_cast<std::size_t>(d.tensor)].kind() ==
                                              model::StateKind::temporal
                                          ? d.token_bias
                                          : 0);
    ctx.rec.access.copy_reads.push_back(
        {id, d.tensor, d.group, src_col, d.src_block_id, to_string(kind)});
    ctx.rec.access.writes.push_back(
        {id, d.tensor, d.group, d.dst_col, d.dst_block_id, to_string(kind)});
  }
  ctx.rec.launches.push_back({.kind = kind,
                              .status = result.status,
                              .unsupported_reason = result.unsupported_reason,
                              .decisions = std::move(result.decisions),
                              .requests = std::move(result.requests)});
  if (result.status == model::LaunchStatus::unsupported) {
    ctx.rec.finding = make_finding(layout_, FindingKind::unsupported_copy, ctx.step.index, "", -1,
                                   -1, -1, result.unsupported_reason, "");
    return false;
  }
  return true;
}

} // namespace mc::oracle::engine
