// Replay of a recorded trace (FORMAT.md) on the oracle and on a backend, step by step
// (DESIGN.md, "Engine level"; `mambacheck replay`).
//
// Each step read from the trace runs on the oracle Replayer (runner, ledger, every invariant,
// the shadow block manager: oracle/engine/replay.h) and on the GPU-side EngineRunner (host or
// cuda executor, optionally with a kernel or runner mutant), in the lockstep loop (lockstep.h):
// the two records and every arena byte are compared after each step. The first finding or
// difference stops the replay and is named by step and trace line.
// Streaming: one step in memory at a time; memory grows with the requests in flight (the
// reader's live set, the runners' rows and the ledger), never with the number of steps.
#pragma once

#include "gpu/engine/engine_runner.h"
#include "gpu/mutant.h"
#include "harness/arena_compare.h"
#include "harness/difference.h"
#include "harness/step_view.h"
#include "model/coverage.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/replay.h"
#include "scenarios/trace.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mc::harness {

struct ReplayOptions {
  model::Backend executor = model::Backend::host;
  // When set, the launches run on its kernels instead (an external worker's); not owned.
  gpu::engine::ExecutorSource* external = nullptr;
  std::optional<model::RunnerFlavour> runner; // default: the trace's config.runner
  oracle::engine::V1CopyPath v1_copy_path = oracle::engine::V1CopyPath::precopy;
  model::V2TableRows v2_table_rows = model::V2TableRows::batch_row;
  bool deferred_postprocess = false; // V2: model/runner_options.h
  // The recorded engine had a writer not ordered with its steps (a KV connector's loads): as
  // the trace header's scheduler.unordered_writer (model/scheduler_contract.h).
  bool unordered_writer = false;
  gpu::Mutant kernel_mutant = gpu::Mutant::none;
  gpu::engine::RunnerMutant runner_mutant = gpu::engine::RunnerMutant::none;
  std::int64_t steps_max = -1; // -1: the whole trace
  // 0: every layer of the trace; else at most this many per group (model::cap_layers).
  std::int32_t layers_max = 0;
  // reference: the oracle on its plain structures and byte states (oracle/engine/structures.h,
  // state_store.h); the same steps, verdicts and texts, slower.
  oracle::engine::Structures structures = oracle::engine::Structures::fast;
  ArenaComparePolicy arena_compare; // how much of the arenas each step compares
  // Called after every step that held (progress lines).
  std::function<void(std::int64_t steps_done)> on_step;
  // When set: what the oracle believes happened, every step it ran (step_view.h).
  std::function<void(const StepView&)> on_view;
  // When set: called once when a step failed, with both sides' arenas as that step left them
  // (a picture of the counterexample draws the bytes that differ).
  std::function<void(const Difference&, const std::vector<model::Arena>& oracle_arenas,
                     const std::vector<model::Arena>& backend_arenas)>
      on_failure;
};

struct ReplayResult {
  std::string trace;         // the file (or stream) name
  std::string preset;        // empty for an inline layout
  model::CacheConfig config; // the trace's, runner as replayed
  std::int32_t trace_layers = 0; // the most layers a group of the trace has
  std::int32_t layers_max = 0;   // as replayed: 0 every layer, else at most this many per group
  oracle::engine::ReplayStats stats;
  std::int64_t steps_compared = 0;
  std::int64_t bytes_compared = 0;
  ArenaCoverage arenas; // how the arenas were compared
  bool interrupted = false; // SIGINT or SIGTERM stopped it before the trace's end
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  std::optional<oracle::engine::Finding> finding; // first broken invariant (oracle side)
  std::optional<Difference> mismatch;             // first oracle vs backend difference
  // Every expectation that failed, in trace order, with its trace line: a failed expectation
  // does not stop the replay (the oracle, not the trace, decides what runs), so a table of an
  // engine's test is checked whole.
  struct FailedExpectation {
    std::int64_t line = -1;
    Difference difference;
    // "EXPECTATION at step S (line L): request R: expect.FIELD: ..."
    std::string text() const;
  };
  std::vector<FailedExpectation> expectations_failed;
  std::int64_t expectations_checked = 0;          // fields of `expect` objects checked
  std::int64_t stop_step = -1;                    // step index of the finding or difference
  std::int64_t stop_line = -1;                    // its trace line
  bool held() const { return !finding && !mismatch && expectations_failed.empty(); }
  // The first of the trace's expectations that failed; null when all held.
  const Difference* expectation() const {
    return expectations_failed.empty() ? nullptr : &expectations_failed.front().difference;
  }
  // One line: "held: N steps ..." or the finding or difference with step and line.
  std::string summary() const;
};

// Throws model::InputError for a malformed or impossible trace (FILE:LINE: field: reason),
// model::EnvironmentError when the executor cannot run here.
ReplayResult replay_trace(scenarios::TraceReader& reader, const ReplayOptions& options);
ReplayResult replay_file(const std::filesystem::path& trace, const ReplayOptions& options);

// What the oracle believes happened at every step of a trace (options.on_view), on the oracle
// alone: no backend runs, so none of the code under test. A counterexample's steps view is
// written so in the campaign's own process, whatever the kernels it found do. Stops after the
// first broken invariant; returns the steps viewed. Errors as replay_trace.
std::int64_t view_trace_file(const std::filesystem::path& trace, const ReplayOptions& options);

} // namespace mc::harness
