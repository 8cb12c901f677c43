// Replay on the oracle side: steps given from outside (a recorded trace) run on the oracle
// runner, the ground-truth ledger and every invariant, without the scheduler model.
//
// What the scheduler model gives a simulated run, a replay rebuilds from the steps: a shadow
// BlockManager takes the trace's tables (adopt_first, adopt_growth) and applies the block
// manager's rules to them (frees of the block two steps back, preemptions, resets, prefix-cache
// registrations after each step), so the invariants about who may write which block hold a
// recorded scheduler to the same standard. Each step, in the order of Engine::step:
//   shadow tables -> consistency of the step with the committed past -> ledger -> runner ->
//   invariants after the step -> cache registrations -> invariants after the commit.
// A step that contradicts the past (a count that does not follow, a held block handed out
// again) is a finding of kind inconsistent_step: a trace may be well formed yet describe a
// scheduler that broke a rule. Memory grows with the requests in flight, not with the steps.
#pragma once

#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/block_manager.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/invariants.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/options.h"
#include "oracle/engine/runner.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace mc::oracle::engine {

struct ReplayStats {
  std::int64_t steps = 0;
  std::int64_t request_steps = 0;
  std::int64_t tokens = 0; // scheduled, drafts included
  std::int64_t arrivals = 0;
  std::int64_t finished = 0;
  std::int64_t preemptions = 0;
  std::int64_t resumes = 0;
  std::int64_t resets = 0;
  std::int64_t prefix_hits = 0; // new or resumed requests starting from computed tokens
  std::map<std::string, std::int64_t> copies_by_kind;
  std::int64_t launches = 0;
  std::int64_t bytes_checked = 0;
};

class Replayer {
public:
  // `layout.config` is the trace's (its runner flavour is ignored: options.flavour counts).
  Replayer(const model::Layout& layout, const RunnerOptions& options,
           std::int32_t cache_sweep_every = 64, Structures structures = Structures::fast);

  // Runs one step; the first finding stops the replay (step() must not be called again).
  std::optional<Finding> step(const model::Step& step);

  const StepRecord& last_record() const { return last_record_; }
  OracleRunner& runner() { return runner_; }
  const BlockManager& blocks() const { return blocks_; }
  const Ledger& ledger() const { return ledger_; }
  const ReplayStats& stats() const { return stats_; }

  // Whether each prefix hit is held to the longest the shadow cache offers (default). The
  // shadow frees blocks when the trace says so; a scheduler with deferred (async) frees can see
  // a different cache at admission, so a replay of its steps turns the check off.
  void set_check_prefix_hits(bool check) { check_prefix_hits_ = check; }

private:
  std::optional<Finding> run_step(const model::Step& step);
  std::optional<Finding> apply_tables(const model::Step& step);
  std::optional<Finding> check_counts(const model::Step& step) const;
  void commit(const model::Step& step);
  Finding inconsistent(std::int64_t step, std::string req_id, std::string detail,
                       std::string expected) const;

  model::Layout layout_;
  std::int32_t cache_sweep_every_ = 64;
  std::int32_t tail_tokens_ = 1;
  bool check_prefix_hits_ = true;
  BlockManager blocks_;
  OracleRunner runner_;
  Ledger ledger_;
  InvariantChecker checker_;
  // Tokens computed after the last step a request ran in; absent for a request that has not
  // run yet or was preempted since (it then starts again from a prefix hit or 0).
  std::unordered_map<std::string, std::int32_t> computed_after_;
  StepRecord last_record_;
  ReplayStats stats_;
  bool stopped_ = false;
};

} // namespace mc::oracle::engine
