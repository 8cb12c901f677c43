// One engine-level fuzz case: a config (preset family, block sizes, drafts, runner flavour,
// copy path, pool, budget, rates), an explicit workload (the requests, their prompts and true
// continuations) and the scheduler seed. generate_engine_case draws it from a seed and a size
// (0..100: tiny runs of a few requests up to hundreds of steps and a hundred requests); the
// shrinker (engine_shrink.cpp) edits its fields directly. run_engine_case runs it on the
// oracle engine and the GPU-side runner step by step and names the first difference.
#pragma once

#include "fuzz/engine/steer.h"
#include "fuzz/isolate.h"
#include "gpu/engine/runner_mutant.h"
#include "gpu/mutant.h"
#include "harness/difference.h"
#include "harness/scheduler_mutant.h"
#include "model/coverage.h"
#include "oracle/engine/kv_manager.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mc::fuzz {

struct EngineCase {
  std::uint64_t case_seed = 0;
  int size = 0;
  std::string preset;        // the family the layout came from
  bool preset_layout = true; // spec.groups are still the preset's (else the trace inlines them)
  model::CacheConfig config;
  model::LayoutSpec spec; // spec.num_blocks is the pool size
  oracle::engine::EngineOptions engine;
  std::vector<oracle::engine::RequestSpec> requests; // sorted by arrival step
  std::uint64_t scheduler_seed = 0;
  std::int64_t num_steps = 0;
  SteerBoosts steer; // what it was drawn with (none: an unsteered campaign's case)
};

inline constexpr int kEngineSizeMax = 100;
inline constexpr std::int64_t kEngineCaseArenaBytesMax = std::int64_t{4} << 20;
// A case at production sizes keeps more of its family's layers: every step compares the whole
// arenas, so this bounds its cost per step.
inline constexpr std::int64_t kProductionCaseArenaBytesMax = std::int64_t{16} << 20;

// Sizes a campaign fixes instead of drawing (`fuzz --level engine --block-size --token-budget`).
// A fixed budget also caps the drawn block size and drafts so that every case stays valid.
struct EngineCaseFixed {
  std::optional<std::int32_t> block_size;
  std::optional<std::int32_t> token_budget;
  bool async_scheduling = false; // every case async (`fuzz --async`), not a quarter of them
  // The launch kinds the kernels under test cover (an external worker's); empty: all. A case
  // whose runner would launch another kind takes the nearest runner that launches only these
  // (the other V2 table convention, another V1 copy path, the other flavour).
  std::vector<model::LaunchKind> kinds;
  // Knobs a steered campaign boosts for this case's epoch (fuzz/engine/steer.h); none: the
  // draws of an unsteered campaign.
  SteerBoosts steer;
};

// As the report states them and a case worker receives them: block_size, token_budget, async,
// steer_boosts, kinds, each only where set.
nlohmann::json to_json(const EngineCaseFixed& fixed);
EngineCaseFixed fixed_from_json(const nlohmann::json& j);

// Throws InputError for sizes no valid case has (a budget below a fixed block size).
void validate_fixed(const EngineCaseFixed& fixed);

// Deterministic for (case_seed, size, fixed); always a valid case (the clean runner holds on
// it). Without fixed sizes the draws are those of every earlier version.
EngineCase generate_engine_case(std::uint64_t case_seed, int size,
                                const EngineCaseFixed& fixed = {});

// The workload bounds in `c.engine.workload` made to cover exactly `c.requests` (what
// validate_options checks against the pool).
void fit_workload_bounds(EngineCase& c);

// One line: preset, config, pool, budget, requests, steps.
std::string describe(const EngineCase& c);
nlohmann::ordered_json to_json(const EngineCase& c);

struct EngineRunOptions {
  model::Backend executor = model::Backend::host;
  gpu::Mutant kernel_mutant = gpu::Mutant::none;
  gpu::engine::RunnerMutant runner_mutant = gpu::engine::RunnerMutant::none;
  // Rewrites every step the oracle's scheduler makes (harness/scheduler_mutant.h).
  harness::SchedulerMutant scheduler_mutant = harness::SchedulerMutant::none;
  // Run the case in a forked child (fuzz/isolate.h): a kernel that faults, or a run past
  // timeout_seconds (0: none), is a failure of kind "crash" or "timeout" at the step it
  // reached. Host executor only (a forked child cannot use the parent's CUDA context).
  bool isolate = false;
  double timeout_seconds = 0.0;
  // When set, the launches run on its kernels (an external worker's; not owned, never
  // isolated: a crash of the worker is already a finding at its step).
  gpu::engine::ExecutorSource* external = nullptr;
  // A KV cache manager under test (docs/block-manager.md): its worker command, which case
  // workers start for themselves, and this process's own (not owned; never isolated: the
  // manager runs in its own process). Every KV cache call of the scheduler model goes to it
  // and the Replayer judges its tables (harness/managed_steps.h).
  std::string block_manager;
  double block_manager_timeout = 60.0;
  oracle::engine::KvManager* manager = nullptr;
};

struct EngineOutcome {
  bool valid = true; // false: the case's options were rejected (InputError)
  std::string invalid_reason;
  std::int64_t steps_run = 0; // steps executed, the failing one included
  std::int64_t bytes_compared = 0;
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  std::optional<harness::Difference> failure;
  // The block manager under test refused the case's sizes (KvManagerRefusal): nothing ran.
  std::string refused_by_manager;
  bool failed() const { return valid && failure.has_value(); }
};

// The first `steps_max` steps the oracle engine schedules for `c` (rewritten by `mutant`),
// without running any backend: what a counterexample's trace holds (the backend may crash on
// them).
// With `manager` the steps are planned through it; `contract`, when given, receives the
// contract its tables are judged by (a trace's header says it).
std::vector<model::Step> oracle_steps(const EngineCase& c, std::int64_t steps_max,
                                      harness::SchedulerMutant mutant = {},
                                      oracle::engine::KvManager* manager = nullptr,
                                      model::SchedulerContract* contract = nullptr);

// The case as it runs with a KV cache manager under test: vLLM's attention block size and a
// pool grown for the manager's attention groups (harness::fit_to_manager); `c` itself without
// one.
EngineCase with_manager_pool(const EngineCase& c, const oracle::engine::KvManager* manager);

// An outcome as it travels from an isolated child process back to the campaign.
nlohmann::ordered_json to_json(const EngineOutcome& outcome);
EngineOutcome outcome_from_json(const nlohmann::ordered_json& j);

// Whether runs with `run` can still go on in this process: false once a device fault has left
// the process's CUDA context unusable for good (cuda only), when every later run here would fail
// in its first allocation, a failure of no case of its own.
bool runs_here_possible(const EngineRunOptions& run);

// One run of `c` in this process that reports each step it starts as its progress
// (fuzz/isolate.h): what a forked child or a case worker runs, so that a crash names its step.
EngineOutcome run_engine_case_reporting_steps(const EngineCase& c, const EngineRunOptions& run);
// The outcome from how the process that ran the case ended: the payload's outcome, or a crash
// or a timeout at the step it had reached (its progress).
EngineOutcome isolated_engine_outcome(const IsolatedOutcome& r);

// Runs at most c.num_steps steps. `steps_out`, when given, receives every step executed (and
// the run is not isolated); `on_step_started` is called before the backend runs each step.
EngineOutcome run_engine_case(const EngineCase& c, const EngineRunOptions& run,
                              std::vector<model::Step>* steps_out = nullptr,
                              const std::function<void()>& on_step_started = {});

} // namespace mc::fuzz
