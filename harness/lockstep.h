// The engine level's one lockstep loop (DESIGN.md, "Engine level"): step after step, the
// oracle runs a step (scheduled by its own engine, or read from a trace), the GPU-side runner
// executes the same step on a backend (host or cuda executor, clean or with a mutant), and
// their records and every arena byte are compared. The first broken invariant or difference
// stops the loop. Campaigns, engine cases, `run`, `run --record`, replay and the scenario
// library are thin callers that only choose the oracle side and the hooks.
#pragma once

#include "gpu/engine/engine_runner.h"
#include "harness/arena_compare.h"
#include "harness/difference.h"
#include "model/coverage.h"
#include "model/step.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/replay.h"
#include "scenarios/trace.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace mc::harness {

// One step as the oracle ran it. The references stay valid until the next call of next().
struct OracleStep {
  const model::Step& step;
  const oracle::engine::StepRecord& record;
  std::optional<oracle::engine::Finding> finding;
  bool last = false; // the oracle has no step after this one
};

// Where the steps come from: the oracle's scheduler, or a trace.
class OracleSide {
public:
  virtual ~OracleSide() = default;
  // Runs the next step on the oracle; nullopt when there is none.
  virtual std::optional<OracleStep> next() = 0;
  virtual oracle::engine::OracleRunner& runner() = 0;
  virtual const oracle::engine::BlockManager& blocks() const = 0;
  // Requests aborted so far, where the steps come from a scheduler that knows; a trace lists
  // an abort only as a finished request.
  virtual std::optional<std::int64_t> aborts() const { return std::nullopt; }
  // The tokens an EAGLE/MTP drafter adds to each row's allocation beyond its scheduled ones
  // (vLLM's num_lookahead_tokens): the drafts with EAGLE, else 0.
  virtual std::int32_t lookahead() const = 0;
};

// The oracle engine schedules every step; `edit`, when set, changes a step before it runs.
class ScheduledSteps final : public OracleSide {
public:
  explicit ScheduledSteps(oracle::engine::Engine& engine,
                          std::function<void(model::Step&)> edit = {});
  std::optional<OracleStep> next() override;
  oracle::engine::OracleRunner& runner() override { return engine_.runner(); }
  const oracle::engine::BlockManager& blocks() const override {
    return engine_.scheduler().blocks();
  }
  std::optional<std::int64_t> aborts() const override { return engine_.report().aborts; }
  std::int32_t lookahead() const override;

private:
  oracle::engine::Engine& engine_;
  std::function<void(model::Step&)> edit_;
  bool more_ = true;
};

// The steps of a trace, run by the oracle's Replayer (no scheduler model).
class TracedSteps final : public OracleSide {
public:
  TracedSteps(scenarios::TraceReader& reader, oracle::engine::Replayer& replayer);
  std::optional<OracleStep> next() override;
  oracle::engine::OracleRunner& runner() override { return replayer_.runner(); }
  const oracle::engine::BlockManager& blocks() const override { return replayer_.blocks(); }
  std::int32_t lookahead() const override;

private:
  scenarios::TraceReader& reader_;
  oracle::engine::Replayer& replayer_;
  model::Step step_;
};

struct LockstepHooks {
  // Before the oracle runs each step (a step view takes its "before" snapshot).
  std::function<void()> before_step;
  // Every step the oracle ran, before the backend runs it (a trace writer: a failing run's
  // trace then ends with its failing step).
  std::function<void(const OracleStep&)> on_step;
  // After the oracle ran a step without a finding, before the backend runs it: a check of its
  // own that does not stop the loop (a trace's expectations, all of which are checked).
  std::function<void(const OracleStep&)> check_step;
  // After each step that held on both sides (progress lines).
  std::function<void(std::int64_t steps_run)> on_held;
  // An exception of the backend's step (a CUDA error of the kernels under test) ends the loop
  // as a difference of kind "backend-error" instead of propagating. A campaign sets it; a
  // command replaying one trace leaves it, so an environment error stays exit 3.
  bool backend_errors_are_findings = false;
  // How much of the arenas each step compares (arena_compare.h).
  ArenaComparePolicy arena_compare;
  // Stop before the next step once SIGINT or SIGTERM arrived (model/interrupt.h): a command
  // that runs one long trace or simulation. A campaign leaves it off and stops between cases.
  bool stop_on_interrupt = false;
};

struct LockstepResult {
  std::int64_t steps_run = 0;      // steps the oracle ran, the failing one included
  std::int64_t steps_compared = 0; // of those, steps the backend ran and compared
  std::int64_t bytes_compared = 0;
  ArenaCoverage arenas; // how the arenas were compared
  bool interrupted = false; // stopped early by a signal (LockstepHooks::stop_on_interrupt)
  // What the steps compared exercised (engine_coverage.h); a failing step is not counted.
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  std::optional<oracle::engine::Finding> finding; // the first broken invariant
  std::optional<Difference> failure;              // the finding's, or the first difference
  bool held() const { return !failure; }
};

// Runs at most `steps_max` steps (negative: until the oracle side has none).
LockstepResult run_lockstep(OracleSide& oracle, gpu::engine::EngineRunner& backend,
                            std::int64_t steps_max, const LockstepHooks& hooks = {});

} // namespace mc::harness
