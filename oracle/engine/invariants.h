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
#include "oracle/engine/cached_selection.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/runner.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mc::oracle::engine {

// `blocks` is the scheduler's block manager in a simulated run, the replay's shadow of the
// recorded tables in a replay (oracle/engine/replay.h).
class InvariantChecker {
public:
  explicit InvariantChecker(Structures structures)
      : structures_(structures), selection_(structures) {}

  // Before the scheduler commits the step (tables as the step ran).
  std::optional<Finding> after_step(const model::Step& step, const StepRecord& record,
                                    const BlockManager& blocks, OracleRunner& runner,
                                    const Ledger& ledger, std::int64_t& bytes_checked);
  // After the scheduler committed the step (new cache registrations).
  std::optional<Finding> after_commit(std::int64_t step, const BlockManager& blocks,
                                      OracleRunner& runner, bool sweep_all,
                                      std::int64_t& bytes_checked);

private:
  Structures structures_;
  CachedSelection selection_;
  std::vector<const RequestBlocks*> tables_; // after_step: the block manager's, by batch row
};

} // namespace mc::oracle::engine
