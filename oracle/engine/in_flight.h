// Async scheduling's ground truth (REFERENCE.md 3): a step is planned while the step before it
// runs, so until that step completes nothing it can read or write may go to another request.
// Two invariants, held the same way to the oracle's scheduler (the engine) and to a trace
// (replay, against its shadow block manager):
// - a block a step hands out from the pool (a running request's appended block that is not an
//   old speculative block moving to the end, a new or resumed request's table less its prefix
//   hit) is not held back: freed while this step was planned, by a table of the step in
//   flight (in_flight_block_reused);
// - no block this step writes for one request was read or written by the step in flight for
//   another (in_flight_write_conflict).
// The third, that every block registered for prefix reuse still holds its boundary's sequential
// ground truth, is the cached-state check of invariants.h, run after each commit.
#pragma once

#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/runner.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

namespace mc::oracle::engine {

// Whether block `block` of group `group` is held back (BlockPool::held_back).
using HeldBack = std::function<bool(std::int32_t group, std::int32_t block)>;

// A running request's growth: `old_row` its table before the step (its last num_spec_blocks
// entries are the speculative blocks that may move), `appended` the step's new_block_ids.
std::optional<Finding> check_growth_handout(const model::Layout& layout, const model::Step& step,
                                            const std::string& req_id,
                                            const model::GroupBlockIds& old_row,
                                            const model::GroupBlockIds& appended,
                                            const HeldBack& held_back);

// A new or resumed request's first table; the block at the prefix hit's position
// (num_computed / B - 1) is shared, not handed out.
std::optional<Finding> check_first_handout(const model::Layout& layout, const model::Step& step,
                                           const std::string& req_id,
                                           const model::GroupBlockIds& table,
                                           std::int32_t num_computed, const HeldBack& held_back);

// What the step in flight touched, by block, for the write check of the step planned during it.
class InFlightAccesses {
public:
  // The accesses of `step`, which ran (its copy reads and its writes).
  void remember(const model::Step& step, const StepRecord& record);
  void clear();
  // The first write of `record` (of `step`) that hits a block the remembered step touched for
  // another request, when `step` was planned during it.
  std::optional<Finding> check(const model::Layout& layout, const model::Step& step,
                               const StepRecord& record) const;

private:
  struct Toucher {
    std::string req_id;
    bool several = false; // touched for more than one request
  };
  std::int64_t step_ = -1;
  std::unordered_map<std::uint64_t, Toucher> touched_; // by (group << 32) | block
};

} // namespace mc::oracle::engine
