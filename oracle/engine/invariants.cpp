#include "oracle/engine/invariants.h"

#include "model/block_table.h"
#include "oracle/engine/state_io.h"
#include "oracle/engine/table_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string>

namespace mc::oracle::engine {
namespace {

// The block manager's table of one request and group (empty once it finished or was preempted),
// by batch row: every request is looked up once per step.
std::span<const std::int32_t> held_of(std::span<const RequestBlocks* const> tables,
                                      std::int32_t batch_row, std::int32_t group) {
  const RequestBlocks* blocks = tables[static_cast<std::size_t>(batch_row)];
  if (blocks == nullptr) return {};
  return blocks->groups[static_cast<std::size_t>(group)].block_ids;
}

std::optional<std::string> illegal_write(const BlockAccess& w, const BlockManager& blocks,
                                         std::span<const RequestBlocks* const> tables,
                                         std::int64_t num_blocks, Structures structures) {
  if (w.block_id == model::kNullBlockId) return "writes the null block";
  if (w.block_id < 0 || w.block_id >= num_blocks) return "writes outside the arena (a pad slot?)";
  const BlockPool& pool = blocks.pool(w.group);
  if (!holds(held_of(tables, w.batch_row, w.group), w.col, w.block_id, structures))
    return pool.ref_count(w.block_id) == 0 ? "writes a freed block"
                                           : "writes a block the request does not hold";
  // The retained ends of a copy (block_pool.h) are no other request's.
  if (pool.ref_count(w.block_id) - pool.retained(w.block_id) > 1)
    return "writes a block shared with another request";
  if (const CachedBlock* c = pool.cached(w.block_id))
    return fmt::format("writes a block registered in the prefix cache (boundary of position {})",
                       c->position);
  return std::nullopt;
}

std::optional<Finding> check_accesses(const model::Step& step, const StepRecord& record,
                                      const BlockManager& blocks,
                                      std::span<const RequestBlocks* const> tables,
                                      const model::Layout& layout, Structures structures) {
  const auto req_id = [&step](const BlockAccess& a) -> const std::string& {
    return step.scheduled[static_cast<std::size_t>(a.batch_row)].req_id;
  };
  for (const BlockAccess& w : record.access.writes) {
    if (w.batch_row < 0) continue; // a block copy: the block manager's own, judged by what it holds
    if (auto why = illegal_write(w, blocks, tables, layout.spec.num_blocks, structures))
      return make_finding(layout, FindingKind::bad_write, step.index, req_id(w), w.tensor, w.col,
                          w.block_id, fmt::format("{} ({})", *why, w.origin),
                          "a block the request holds alone");
  }
  for (const BlockAccess& r : record.access.copy_reads) {
    if (r.block_id == model::kNullBlockId ||
        !holds(held_of(tables, r.batch_row, r.group), r.col, r.block_id, structures))
      return make_finding(
          layout, FindingKind::bad_read, step.index, req_id(r), r.tensor, r.col, r.block_id,
          fmt::format("the {} copy reads a block the request does not hold", r.origin),
          "a block of the request");
  }
  return std::nullopt;
}

std::optional<Finding> check_rows(const model::Step& step,
                                  std::span<const RequestBlocks* const> tables,
                                  const OracleRunner& runner, Structures structures) {
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const RequestBlocks* rb = tables[b];
    const model::GroupBlockIds* row = runner.next_read(step, b).row;
    if (rb == nullptr || row == nullptr) continue; // finished or preempted since
    for (std::size_t g = 0; g < rb->groups.size(); ++g) {
      const auto& want = rb->groups[g].block_ids;
      const auto& got = (*row)[g];
      const std::int64_t j = first_disagreement(want, got, structures);
      if (j < 0) continue;
      const auto col = static_cast<std::size_t>(j);
      return make_finding(runner.layout(), FindingKind::bad_index, step.index,
                          step.scheduled[b].req_id, -1, static_cast<std::int32_t>(j),
                          col < got.size() ? got[col] : -1,
                          fmt::format("the runner's row of group {} disagrees with the "
                                      "scheduler's table",
                                      g),
                          fmt::format("block {}", want[col]));
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<Finding> InvariantChecker::after_step(const model::Step& step,
                                                    const StepRecord& record,
                                                    const BlockManager& blocks,
                                                    OracleRunner& runner, const Ledger& ledger,
                                                    std::int64_t& bytes_checked) {
  const model::Layout& layout = runner.layout();
  tables_.clear();
  for (const model::ScheduledRequest& s : step.scheduled)
    tables_.push_back(blocks.find(s.req_id, s.key));
  if (auto f = check_accesses(step, record, blocks, tables_, layout, structures_)) return f;
  if (auto f = check_rows(step, tables_, runner, structures_)) return f;
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    const OracleRunner::NextRead next = runner.next_read(step, b);
    const std::optional<ReadPoint>& rp = next.point;
    const RequestTruth& truth = ledger.row_truth(step, b);
    const std::int32_t c = truth.num_committed;
    if (!rp || c == 0) continue;
    const std::int32_t bias =
        layout.config.mode == model::CacheMode::all ? 0 : std::max(rp->num_accepted - 1, 0);
    const model::GroupBlockIds& row = *next.row;
    for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
      const model::StateTensor& t = layout.tensors[i];
      const bool temporal = t.kind() == model::StateKind::temporal;
      const std::int32_t col = rp->state_idx + (temporal ? bias : 0);
      const auto& ids = row[static_cast<std::size_t>(t.group)];
      const std::int32_t block = col >= 0 && col < static_cast<std::int32_t>(ids.size())
                                     ? ids[static_cast<std::size_t>(col)]
                                     : model::kPadSlot;
      std::optional<std::string> wrong;
      if (block <= model::kNullBlockId || block >= layout.spec.num_blocks) {
        wrong = fmt::format("the column holds {}", block == 0 ? "the null block" : "no block");
      } else {
        const auto tensor = static_cast<std::int32_t>(i);
        wrong = temporal
                    ? runner.states().check_temporal(
                          tensor, block, truth.hashes[static_cast<std::size_t>(c)], truth.hashes)
                    : runner.states().check_conv(
                          tensor, block, runner.conv_history()[i], c, bias,
                          {.head = std::span(truth.tokens).first(static_cast<std::size_t>(c))});
        bytes_checked += t.natural_bytes;
      }
      if (wrong)
        return make_finding(layout, FindingKind::wrong_next_state, step.index, s.req_id,
                            static_cast<std::int32_t>(i), col, block,
                            fmt::format("after the step, the state the next step reads "
                                        "(state_idx {}, a = {}) is wrong: {}",
                                        rp->state_idx, rp->num_accepted, *wrong),
                            fmt::format("the state after {} tokens", c));
    }
  }
  return std::nullopt;
}

std::optional<Finding> InvariantChecker::after_commit(std::int64_t step, const BlockManager& blocks,
                                                      OracleRunner& runner, bool sweep_all,
                                                      std::int64_t& bytes_checked) {
  const model::Layout& layout = runner.layout();
  if (sweep_all)
    if (std::optional<std::string> wrong = blocks.check_accounting())
      return make_finding(layout, FindingKind::block_accounting, step, "", -1, -1, -1, *wrong,
                          "every block in exactly one place: held (by as many table entries as "
                          "its references), free, or held back for the step in flight");
  selection_.select(blocks.pools(), sweep_all);
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    const model::StateTensor& t = layout.tensors[i];
    for (const auto& [block, entry_ptr] : selection_.selected(static_cast<std::size_t>(t.group))) {
      const CachedBlock& entry = *entry_ptr;
      const auto tensor = static_cast<std::int32_t>(i);
      const std::int32_t n = entry.num_tokens;
      const auto first =
          static_cast<std::int64_t>(n) - static_cast<std::int64_t>(entry.tail_tokens.size());
      std::optional<std::string> wrong =
          t.kind() == model::StateKind::temporal
              ? runner.states().check_temporal(tensor, block, entry.hash, {})
              : runner.states().check_conv(tensor, block, runner.conv_history()[i], n, 0,
                                           {.first = first, .head = entry.tail_tokens});
      bytes_checked += t.natural_bytes;
      if (wrong)
        return make_finding(
            layout, FindingKind::wrong_cached_state, step, "", static_cast<std::int32_t>(i),
            entry.position, block,
            fmt::format("a block registered for prefix reuse is wrong: {}", *wrong),
            fmt::format("the state after {} tokens (position {})", n, entry.position));
    }
  }
  selection_.mark_checked();
  return std::nullopt;
}

} // namespace mc::oracle::engine
