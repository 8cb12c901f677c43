// A simulated engine run on the lockstep loop (simulate.h).
#include "harness/simulate.h"

#include "harness/lockstep.h"
#include "harness/managed_steps.h"
#include "model/errors.h"
#include "model/prng.h"
#include "scenarios/trace.h"
#include "scenarios/workload_import.h"

#include <algorithm>
#include <memory>

namespace mc::harness {
namespace {

// An imported workload (scenarios/workload_import.h) is refused where it is read, by limits
// that scenarios/ restates: they must be the simulator's own.
static_assert(scenarios::kWorkloadRequestsMax == oracle::engine::kRequestsMax);
static_assert(scenarios::kWorkloadSequenceLenMax == oracle::engine::kSequenceLenMax);

scenarios::TraceHeader record_header(const SimulationOptions& o, const model::CacheConfig& config,
                                     const model::LayoutSpec& spec, std::int64_t num_requests) {
  scenarios::TraceHeader header{.config = config, .preset = o.preset, .layout_spec = spec};
  if (o.engine.scheduler.async_scheduling) scenarios::set_async_model_contract(header);
  scenarios::set_hash_unit(header, o.engine.scheduler.hash_block_size);
  header.source = {{"recorder", "mambacheck run"},
                   {"version", MC_VERSION},
                   {"seed", o.seed},
                   {"requests", num_requests},
                   {"workload", o.requests.empty() ? "generated" : "imported"}};
  return header;
}

std::vector<oracle::engine::RequestSpec> workload(const SimulationOptions& o) {
  if (!o.requests.empty()) return o.requests;
  if (o.num_requests < 1 || o.num_requests > oracle::engine::kRequestsMax)
    model::fail_input("--requests must be in 1..{}, got {}", oracle::engine::kRequestsMax,
                      o.num_requests);
  auto rng = model::SplitMix64::from_seed(o.seed);
  return oracle::engine::generate_workload(o.engine.workload, o.num_requests,
                                           model::kSpecTokensMax + 2, rng);
}

} // namespace

gpu::engine::RunnerOptions backend_runner_options(const oracle::engine::RunnerOptions& oracle,
                                                  gpu::engine::RunnerMutant runner_mutant,
                                                  gpu::Mutant kernel_mutant) {
  gpu::engine::RunnerOptions options;
  static_cast<model::RunnerOptions&>(options) = oracle;
  options.mutant = runner_mutant;
  options.kernel_mutant = kernel_mutant;
  return options;
}

SimulationResult simulate(const SimulationOptions& o) {
  model::CacheConfig config = o.config;
  config.runner = o.engine.runner.flavour;
  if (o.num_steps < 0 || o.num_steps > oracle::engine::kStepsMax)
    model::fail_input("--steps must be in 0..{}, got {}", oracle::engine::kStepsMax, o.num_steps);
  std::vector<oracle::engine::RequestSpec> requests = workload(o);
  model::LayoutSpec spec = o.spec;
  if (o.block_manager)
    fit_to_manager(config, spec, requests, o.engine, *o.block_manager);
  const model::Layout layout = model::build_layout(config, spec);
  oracle::engine::validate_options(o.engine, layout);
  const auto num_requests = static_cast<std::int64_t>(requests.size());
  std::optional<oracle::engine::Engine> engine;
  std::optional<ManagedSteps> managed;
  std::optional<ScheduledSteps> scheduled;
  SimulationResult result;
  scenarios::TraceHeader header = record_header(o, config, spec, num_requests);
  if (o.block_manager) {
    try {
      managed.emplace(layout, std::move(requests), o.seed, o.engine, *o.block_manager);
    } catch (const oracle::engine::KvManagerRefusal& e) {
      model::fail_input("--block-manager: the manager refuses these sizes: {}", e.reason);
    } catch (const oracle::engine::KvManagerFault& e) {
      result.finding = oracle::engine::make_finding(
          layout, oracle::engine::FindingKind::block_manager_fault, 0, "", -1, -1, -1, e.message,
          "an answer to setup");
      return result;
    }
    set_manager_contract(header, managed->contract(), o.engine.scheduler.async_scheduling);
    header.source["block_manager"] = true;
  } else {
    engine.emplace(layout, std::move(requests), o.seed, o.engine);
    scheduled.emplace(*engine);
  }
  OracleSide& steps = managed ? static_cast<OracleSide&>(*managed) : *scheduled;
  std::unique_ptr<scenarios::TraceWriter> writer;
  if (o.record) writer = std::make_unique<scenarios::TraceWriter>(*o.record, header);
  require_covered(o.external, o.engine.runner, config.mode);
  gpu::engine::EngineRunner backend(
      layout, backend_runner_options(o.engine.runner, o.runner_mutant, gpu::Mutant::none),
      o.executor, o.external);
  LockstepHooks hooks{.arena_compare = o.arena_compare, .stop_on_interrupt = true};
  StepViewer viewer;
  if (o.on_view) hooks.before_step = [&] { viewer.before(steps); };
  if (writer || o.on_view)
    hooks.on_step = [&](const OracleStep& step) {
      if (writer) writer->write(step.step);
      if (o.on_view) o.on_view(viewer.after(steps, step));
    };
  const LockstepResult r = run_lockstep(steps, backend, o.num_steps, hooks);
  result.report = engine ? engine->report() : managed->report(r.steps_run, r.finding);
  result.steps_compared = r.steps_compared;
  result.bytes_compared = r.bytes_compared;
  result.arenas = r.arenas;
  result.interrupted = r.interrupted;
  result.coverage = r.coverage;
  result.finding = r.finding;
  if (r.failure && !r.finding) result.mismatch = r.failure;
  result.report.requests = num_requests;
  return result;
}

std::optional<model::LaunchKind> uncovered_kind(const gpu::engine::ExecutorSource* external,
                                                const model::RunnerOptions& runner,
                                                model::CacheMode mode) {
  if (external == nullptr) return std::nullopt;
  for (const model::LaunchKind kind : model::runner_launch_kinds(runner, mode))
    if (std::ranges::find(external->kinds(), kind) == external->kinds().end()) return kind;
  return std::nullopt;
}

void require_covered(const gpu::engine::ExecutorSource* external,
                     const model::RunnerOptions& runner, model::CacheMode mode) {
  if (const std::optional<model::LaunchKind> kind = uncovered_kind(external, runner, mode))
    model::fail_input("--external: the worker's kernels do not cover {}, which this run's {} "
                      "runner launches (its greeting lists the kinds it covers)",
                      model::to_string(*kind), model::to_string(runner.flavour));
}

} // namespace mc::harness
