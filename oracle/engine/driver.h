// The engine simulation on the oracle side: schedule, run, check, commit, step after step.
//
// Engine holds the parts (scheduler, oracle runner, ground-truth ledger, invariant checker)
// and runs one step at a time, so tests can look at every Step and StepRecord and a later
// GPU runner can be fed the same Steps. run_engine drives a whole run from a seed and reports
// what happened and the first finding; it is deterministic for a seed.
//
// With async scheduling (SchedulerOptions::async_scheduling) one step is in flight: each call
// plans step N+1 while step N, executed by the last call, still waits for its commit; then N
// completes (the scheduler's update: acceptance, rollback of rejected drafts, cached blocks),
// N+1 gets its true counts (Scheduler::finalize) and runs. The checks of in_flight.h hold
// N+1 to what N could still touch.
#pragma once

#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/in_flight.h"
#include "oracle/engine/invariants.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/options.h"
#include "oracle/engine/runner.h"
#include "oracle/engine/scheduler.h"
#include "oracle/engine/workload.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mc::oracle::engine {

struct EngineReport {
  std::int64_t steps = 0;
  std::int64_t request_steps = 0;
  std::int64_t tokens = 0;
  std::int64_t requests = 0; // in the workload
  std::int64_t finished = 0;
  std::int64_t aborts = 0;
  std::int64_t preemptions = 0;
  std::int64_t forced_preemptions = 0;
  std::int64_t resets = 0;
  std::int64_t prefix_hits = 0;
  std::map<std::string, std::int64_t> copies_by_kind; // copy decisions per launch kind
  std::int64_t launches = 0;
  std::int64_t bytes_checked = 0;
  std::optional<Finding> first_finding;
};

class Engine {
public:
  Engine(const model::Layout& layout, std::vector<RequestSpec> requests, std::uint64_t seed,
         const EngineOptions& options);

  // One whole step; false once every request finished or a finding stopped the run.
  // `edit` may change the step before it runs (tests force an acceptance that way).
  bool step(const std::function<void(model::Step&)>& edit = {});

  const model::Step& last_step() const { return last_step_; }
  const StepRecord& last_record() const { return last_record_; }
  const Scheduler& scheduler() const { return scheduler_; }
  void request_reset_prefix_cache() { scheduler_.request_reset_prefix_cache(); }
  OracleRunner& runner() { return runner_; }
  const Ledger& ledger() const { return ledger_; }
  const EngineReport& report() const { return report_; }
  const EngineOptions& options() const { return options_; }

private:
  std::optional<Finding> run_scheduled(const model::Step& step, StepRecord& record);
  // Async: N + 1 (`step`, planned while the last step ran) completes the step in flight, then runs.
  std::optional<Finding> run_planned_in_flight(model::Step& step, StepRecord& record);
  // The step as the runner takes it, from the ledger to the invariants after it.
  std::optional<Finding> execute_checked(const model::Step& step, StepRecord& record);
  std::optional<Finding> check_tables(const model::Step& step) const;
  // A block an edited step hands out to `req_id` (its first table when `first_table`, else the
  // blocks appended to its row) that the model's pool counts as held by another request.
  std::optional<Finding> handed_out_held(const model::Step& step, const std::string& req_id,
                                         const model::GroupBlockIds& listed, std::int32_t hit,
                                         bool first_table) const;

  EngineOptions options_;
  Scheduler scheduler_;
  OracleRunner runner_;
  Ledger ledger_;
  InvariantChecker checker_;
  bool edited_ = false; // the step running now was edited after the scheduler made it
  model::Step last_step_;
  StepRecord last_record_;
  EngineReport report_;
  bool in_flight_ = false; // async: last_step_ ran and waits for the scheduler's commit
  InFlightAccesses in_flight_accesses_;
};

// Builds the layout (pool size = spec.num_blocks), the workload and runs up to num_steps.
EngineReport run_engine(const model::CacheConfig& config, const model::LayoutSpec& spec,
                        std::int64_t num_steps, std::int32_t num_requests, std::uint64_t seed,
                        const EngineOptions& options);

// Sets the outcome of a decode row to `a` accepted tokens, rewriting its drafts so that the
// first a - 1 match the truth and the rest do not (`truth`: the request's true sequence).
void force_acceptance(model::ScheduledRequest& row, std::int32_t num_computed,
                      const std::vector<std::int32_t>& truth, std::int32_t a);

} // namespace mc::oracle::engine
