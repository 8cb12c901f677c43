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
//
// An async trace (recorded with one step in flight, FORMAT.md) replays in the engine's async
// order (driver.h): a step planned during the one before it is checked against that step's
// rows (optimistic counts, in_flight.h), the shadow marks every block of those rows' tables
// in flight before it applies the step's frees, and the boundary blocks the step before it
// committed are registered only after the step's tables (the scheduler cached them when that
// step's output arrived, after this one was planned).
#pragma once

#include "model/layout.h"
#include "model/scheduler_contract.h"
#include "model/step.h"
#include "oracle/engine/attention_shadow.h"
#include "oracle/engine/block_manager.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/in_flight.h"
#include "oracle/engine/invariants.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/runner.h"
#include "oracle/engine/structures.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
  // `async_scheduling`: the trace's header says so (steps may be planned during another).
  // `contract`: what the recorded scheduler's block manager promises (the header's
  // `scheduler`); a deferred postprocess (options) is an unordered writer whatever it says.
  Replayer(const model::Layout& layout, const RunnerOptions& options,
           std::int32_t cache_sweep_every = 64, Structures structures = Structures::fast,
           bool async_scheduling = false, model::SchedulerContract contract = {});

  // Runs one step; the first finding stops the replay (step() must not be called again).
  std::optional<Finding> step(const model::Step& step);

  const StepRecord& last_record() const { return last_record_; }
  OracleRunner& runner() { return runner_; }
  const BlockManager& blocks() const { return blocks_; }
  const Ledger& ledger() const { return ledger_; }
  const ReplayStats& stats() const { return stats_; }
  const model::SchedulerContract& contract() const { return contract_; }

private:
  std::optional<Finding> run_step(const model::Step& step);
  std::optional<Finding> apply_tables(const model::Step& step);
  // The step's block copies (partial-hash hits): which admitted request's hit each one serves
  // (by group and destination block), and the copies of the producers of partial tails, of
  // `req_id` (empty: of any request), adopted by the shadow block manager.
  void note_hit_copies(const model::Step& step);
  std::optional<Finding> adopt_producer_copies(const model::Step& step, const std::string& req_id);
  std::optional<Finding> adopt_hit_copies(const model::Step& step, const std::string& req_id,
                                          std::int32_t computed,
                                          std::span<const model::TokenHash> hashes);
  std::optional<Finding> check_counts(const model::Step& step) const;
  std::optional<Finding> check_planned_count(const model::Step& step,
                                             const model::CachedRequestData& c) const;
  // Async: the blocks of the rows of the step in flight, as its tables are now.
  void mark_in_flight(const model::Step& step);
  // The registrations of the last step, held for an async trace (above); `step` the one now
  // replayed, whose departures have no tables left to register.
  std::optional<Finding> commit_pending(const model::Step& step);
  void commit(const model::Step& step);
  // The tokens the planning of each row of `step` registers (registrations_): those it
  // schedules that its scheduler knew, the output of the step then in flight not yet among
  // them. Needed with at_schedule registration, and for the attention groups' prefixes.
  bool plans_registrations() const {
    return contract_.registration == model::CacheRegistration::at_schedule || attention_.active();
  }
  void plan_registrations(const model::Step& step);
  // at_schedule: the boundaries registrations_ planned, registered once the step ran.
  void register_at_schedule(const model::Step& step);
  // The longest hit the shadow offers a request admitted now: the longest cached aligned
  // prefix, at or below the attention groups' hit where they are known. `strict`: without
  // the blocks held back by policy only (a manager may offer them or keep them back).
  std::int32_t expected_hit(std::span<const model::TokenHash> hashes, std::int32_t num_tokens,
                            bool strict) const;
  // The running requests' allocations register their attention blocks before any admission.
  void note_running_attention(const model::Step& step);
  // Shared pool: blocks group `group` (-1: an attention group) took lose the cache entries
  // other groups kept for them; one another Mamba group holds is a finding.
  std::optional<Finding> taken_elsewhere(std::int64_t step, const std::string& req_id,
                                         std::int32_t group, std::span<const std::int32_t> ids);
  std::optional<Finding> taken_by_mamba(std::int64_t step, const std::string& req_id,
                                        const model::GroupBlockIds& tables);
  Finding inconsistent(std::int64_t step, std::string req_id, std::string detail,
                       std::string expected) const;

  model::Layout layout_;
  std::int32_t cache_sweep_every_ = 64;
  std::int32_t tail_tokens_ = 1;
  bool async_ = false;
  model::SchedulerContract contract_;
  // Blocks the step in flight can touch are held back and checked (an unordered writer).
  bool hold_in_flight_ = false;
  // This step's copies: adopted yet, and those that serve an admitted request's hit (by group
  // and destination block, its request).
  std::vector<bool> copy_adopted_;
  std::vector<std::string> copy_hit_of_;
  BlockManager blocks_;
  AttentionShadow attention_;
  OracleRunner runner_;
  Ledger ledger_;
  InvariantChecker checker_;
  // Tokens computed after the last step a request ran in; absent for a request that has not
  // run yet or was preempted since (it then starts again from a prefix hit or 0).
  std::unordered_map<std::string, std::int32_t> computed_after_;
  // The rows of the step replayed last: where each started and how many tokens it scheduled.
  struct LastRow {
    std::int32_t start = 0;
    std::int32_t scheduled = 0;
  };
  std::int64_t last_step_ = -1;
  std::unordered_map<std::string, LastRow> last_rows_;
  // Async: its registrations not made yet (request, tokens committed); -1: none pending.
  std::int64_t pending_step_ = -1;
  struct PendingRow {
    std::string req_id;
    std::int32_t num_committed = 0;
    bool drafted = false; // its row had drafts: it caches no partial tail (block_manager.h)
  };
  std::vector<PendingRow> pending_;
  InFlightAccesses in_flight_accesses_;
  // Async, with registrations planned: the tokens known before the output of each row of the
  // step replayed last (what its scheduler knew planning the step after it).
  std::unordered_map<std::string, std::int32_t> known_before_output_;
  std::unordered_map<std::string, std::int32_t> registrations_; // of the step replayed now
  // The rows of that step whose registration reaches past their start: the one among them
  // that ends on a prompt's partial tail caches it.
  std::unordered_set<std::string> tail_rows_;
  StepRecord last_record_;
  ReplayStats stats_;
  bool stopped_ = false;
};

} // namespace mc::oracle::engine
