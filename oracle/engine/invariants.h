// The invariants checked after every step (DESIGN.md, "Invariants after every step"):
// - every write of the step hit a block its request holds alone: not the null block, not a
//   pad slot, not a freed block, not a block shared by a prefix hit or registered in the
//   prefix cache; every copy read a block its request holds;
// - the runner's block-table rows agree with the scheduler's tables where those are real;
// - the state the next step will read as initial (the runner's column and a) equals the
//   sequential ground truth after num_computed tokens;
// - every block registered for prefix reuse holds exactly the ground truth after (p+1)*B
//   tokens (new registrations every step, all of them every few steps).
#pragma once

#include "model/step.h"
#include "oracle/engine/block_manager.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/runner.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace mc::oracle::engine {

// `blocks` is the scheduler's block manager in a simulated run, the replay's shadow of the
// recorded tables in a replay (oracle/engine/replay.h).
class InvariantChecker {
public:
  // Before the scheduler commits the step (tables as the step ran).
  std::optional<Finding> after_step(const model::Step& step, const StepRecord& record,
                                    const BlockManager& blocks, OracleRunner& runner,
                                    const Ledger& ledger, std::int64_t& bytes_checked);
  // After the scheduler committed the step (new cache registrations).
  std::optional<Finding> after_commit(std::int64_t step, const BlockManager& blocks,
                                      OracleRunner& runner, bool sweep_all,
                                      std::int64_t& bytes_checked);

private:
  struct CheckedBlock {
    model::TokenHash hash = 0; // the boundary last found right in this block
    bool seen = false;
  };
  void select_cached(const BlockManager& blocks, bool sweep_all);
  // Per group: the pool and its registration count at the last select_cached.
  struct Registrations {
    const BlockPool* pool = nullptr;
    std::uint64_t seen = 0;
  };

  std::vector<std::vector<CheckedBlock>> checked_; // by group, by block
  std::vector<Registrations> registrations_;       // by group
  std::vector<std::vector<std::pair<std::int32_t, const CachedBlock*>>> to_check_; // by group
  std::vector<const RequestBlocks*> tables_; // after_step: the block manager's, by batch row
};

} // namespace mc::oracle::engine
