// A simulated engine run (`mambacheck run`): the oracle engine's scheduler produces each step
// from a workload (generated from the seed, or given, e.g. `run --workload`), and the lockstep
// loop (lockstep.h) runs it on the oracle and on a backend. With `record` every step is also
// written as a trace before it is compared, so the trace of a failing run ends with its failing
// step and replays to the same result. The same options give the same steps.
#pragma once

#include "gpu/engine/engine_runner.h"
#include "harness/arena_compare.h"
#include "harness/difference.h"
#include "harness/step_view.h"
#include "model/coverage.h"
#include "model/layout.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/kv_manager.h"
#include "oracle/engine/workload.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mc::harness {

struct SimulationOptions {
  model::CacheConfig config;
  model::LayoutSpec spec;
  std::int64_t num_steps = 100;
  std::int32_t num_requests = 8; // generated requests, when `requests` is empty
  std::uint64_t seed = 1;
  oracle::engine::EngineOptions engine; // runner.flavour / v1_copy_path drive both sides
  model::Backend executor = model::Backend::host;
  // When set, the launches run on its kernels instead (an external worker's); not owned.
  gpu::engine::ExecutorSource* external = nullptr;
  gpu::engine::RunnerMutant runner_mutant = gpu::engine::RunnerMutant::none;
  std::vector<oracle::engine::RequestSpec> requests; // empty: generated from the seed
  std::optional<std::filesystem::path> record;       // write the steps here
  ArenaComparePolicy arena_compare; // how much of the arenas each step compares
  std::string preset;                                // for the trace header (empty: inline layout)
  // When set: what the oracle believes happened, every step it ran (step_view.h).
  std::function<void(const StepView&)> on_view;
  // When set, every KV cache call goes to this manager under test and the oracle judges its
  // tables as a trace's (managed_steps.h); not owned.
  oracle::engine::KvManager* block_manager = nullptr;
};

struct SimulationResult {
  oracle::engine::EngineReport report; // the oracle's (steps, preemptions, hits, copies)
  std::int64_t steps_compared = 0;
  std::int64_t bytes_compared = 0;
  ArenaCoverage arenas; // how the arenas were compared
  bool interrupted = false; // SIGINT or SIGTERM stopped it before its steps ran out
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  std::optional<oracle::engine::Finding> finding; // first broken invariant (oracle side)
  std::optional<Difference> mismatch;             // first oracle vs backend difference
  bool held() const { return !mismatch && !finding; }
};

// Throws model::InputError for impossible options, model::EnvironmentError when the executor
// cannot run here or the trace cannot be written.
SimulationResult simulate(const SimulationOptions& options);

// The GPU-side runner's options that mirror the oracle's (flavour, copy path, row stride).
gpu::engine::RunnerOptions backend_runner_options(const oracle::engine::RunnerOptions& oracle,
                                                  gpu::engine::RunnerMutant runner_mutant,
                                                  gpu::Mutant kernel_mutant);

// The first launch kind a runner with `runner` launches in `mode` that `external` does not
// cover, or nullopt (also without `external`).
std::optional<model::LaunchKind> uncovered_kind(const gpu::engine::ExecutorSource* external,
                                                const model::RunnerOptions& runner,
                                                model::CacheMode mode);
// InputError naming that kind, when there is one.
void require_covered(const gpu::engine::ExecutorSource* external,
                     const model::RunnerOptions& runner, model::CacheMode mode);

} // namespace mc::harness
