// The two invariants of a step planned while another ran (in_flight.h).
#include "oracle/engine/in_flight.h"

#include "model/block_table.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {
namespace {

Finding reused(const model::Layout& layout, const model::Step& step, const std::string& req_id,
               std::size_t group, std::int32_t block, std::size_t position,
               std::string_view where) {
  return make_finding(
      layout, FindingKind::in_flight_block_reused, step.index, req_id, -1,
      static_cast<std::int32_t>(position), block,
      fmt::format("block {} of group {} is handed out ({} at position {}) while step {}, still in "
                  "flight when this step was planned, can read or write it: it was freed while "
                  "this step was planned",
                  block, group, where, position, step.planned_during),
      fmt::format("a block no step in flight can touch (block {} is held back until step {} "
                  "completes)",
                  block, step.planned_during));
}

std::uint64_t block_key(std::int32_t group, std::int32_t block) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(group)) << 32) |
         static_cast<std::uint32_t>(block);
}

} // namespace

std::optional<Finding> check_growth_handout(const model::Layout& layout, const model::Step& step,
                                            const std::string& req_id,
                                            const model::GroupBlockIds& old_row,
                                            const model::GroupBlockIds& appended,
                                            const HeldBack& held_back) {
  if (step.planned_during < 0) return std::nullopt;
  const bool align = layout.config.mode == model::CacheMode::align;
  const auto nsb = static_cast<std::size_t>(layout.config.num_spec_blocks);
  for (std::size_t g = 0; g < appended.size() && g < old_row.size(); ++g) {
    const std::vector<std::int32_t>& old_ids = old_row[g];
    const auto old_spec =
        old_ids.end() - static_cast<std::ptrdiff_t>(align ? std::min(nsb, old_ids.size()) : 0);
    for (std::size_t k = 0; k < appended[g].size(); ++k) {
      const std::int32_t block = appended[g][k];
      if (block == model::kNullBlockId) continue;
      if (std::find(old_spec, old_ids.end(), block) != old_ids.end()) continue; // moved
      if (held_back(static_cast<std::int32_t>(g), block))
        return reused(layout, step, req_id, g, block, old_ids.size() + k,
                      fmt::format("appended to {}'s table", req_id));
    }
  }
  return std::nullopt;
}

std::optional<Finding> check_first_handout(const model::Layout& layout, const model::Step& step,
                                           const std::string& req_id,
                                           const model::GroupBlockIds& table,
                                           std::int32_t num_computed, const HeldBack& held_back) {
  if (step.planned_during < 0) return std::nullopt;
  const std::int64_t hit = num_computed / layout.config.mamba_block_size - 1;
  for (std::size_t g = 0; g < table.size(); ++g)
    for (std::size_t j = 0; j < table[g].size(); ++j) {
      const std::int32_t block = table[g][j];
      if (block <= model::kNullBlockId || static_cast<std::int64_t>(j) == hit) continue;
      if (held_back(static_cast<std::int32_t>(g), block))
        return reused(layout, step, req_id, g, block, j,
                      fmt::format("in {}'s first table", req_id));
    }
  return std::nullopt;
}

void InFlightAccesses::remember(const model::Step& step, const StepRecord& record) {
  step_ = step.index;
  touched_.clear();
  const auto add = [&](const BlockAccess& a) {
    if (a.batch_row < 0) return; // a block copy: of a block the step's planning took
    const std::string& id = step.scheduled[static_cast<std::size_t>(a.batch_row)].req_id;
    const auto [it, inserted] = touched_.try_emplace(block_key(a.group, a.block_id), Toucher{id});
    if (!inserted && it->second.req_id != id) it->second.several = true;
  };
  for (const auto* accesses : {&record.access.copy_reads, &record.access.writes})
    for (const BlockAccess& a : *accesses)
      add(a);
}

void InFlightAccesses::clear() {
  step_ = -1;
  touched_.clear();
}

std::optional<Finding> InFlightAccesses::check(const model::Layout& layout, const model::Step& step,
                                               const StepRecord& record) const {
  if (step.planned_during < 0 || step.planned_during != step_) return std::nullopt;
  for (const BlockAccess& w : record.access.writes) {
    const auto it = touched_.find(block_key(w.group, w.block_id));
    if (it == touched_.end() || w.batch_row < 0) continue;
    const std::string& id = step.scheduled[static_cast<std::size_t>(w.batch_row)].req_id;
    if (!it->second.several && it->second.req_id == id) continue;
    return make_finding(
        layout, FindingKind::in_flight_write_conflict, step.index, id, w.tensor, w.col, w.block_id,
        fmt::format("writes block {} ({}) while step {}, in flight when this step was planned, "
                    "touched it for request {}",
                    w.block_id, w.origin, step_, it->second.req_id),
        "no block written by two steps in flight for different requests");
  }
  return std::nullopt;
}

} // namespace mc::oracle::engine
