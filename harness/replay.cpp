// Replay of a trace on the lockstep loop (replay.h).
#include "harness/replay.h"

#include "harness/lockstep.h"
#include "harness/simulate.h"
#include "model/errors.h"

#include <fmt/format.h>

namespace mc::harness {

std::string ReplayResult::summary() const {
  const std::string where = fmt::format("step {} (line {})", stop_step, stop_line);
  if (finding) return fmt::format("FINDING at {}: {}", where, finding->message);
  if (mismatch) return fmt::format("MISMATCH at {}: {}", where, text_after_step(*mismatch));
  if (!expectations_failed.empty()) return expectations_failed.front().text();
  return fmt::format(
      "held: {} steps, {} request-steps, oracle and backend agree on every step{}", stats.steps,
      stats.request_steps,
      expectations_checked > 0 ? fmt::format("; {} expectations held", expectations_checked) : "");
}

std::string ReplayResult::FailedExpectation::text() const {
  return fmt::format("EXPECTATION at step {} (line {}): {}", difference.step, line,
                     text_after_step(difference));
}

namespace {

// The trace's config with the replay's runner, and the layout it gives (checked), cut to the
// replay's depth. A trace names groups and columns, never layers, so every step stays valid.
model::Layout replay_layout(scenarios::TraceReader& reader, const ReplayOptions& options,
                            model::CacheConfig& config, std::int32_t* trace_layers = nullptr) {
  const scenarios::TraceHeader& header = reader.header();
  config = header.config;
  config.runner = options.runner.value_or(header.config.runner);
  model::LayoutSpec spec = header.layout_spec;
  const std::int32_t deepest = model::cap_layers(spec, options.layers_max);
  if (trace_layers) *trace_layers = deepest;
  model::Layout layout = model::build_layout(config, spec);
  // The steps are given: only what the engine model can run is checked, never the options
  // of a scheduler (token budget, arrivals) that generated steps would need.
  try {
    oracle::engine::validate_geometry(layout);
  } catch (const model::InputError& e) {
    model::fail_input("{}:1: config.{}", reader.name(), e.what());
  }
  return layout;
}

oracle::engine::RunnerOptions oracle_options_of(const model::CacheConfig& config,
                                                const ReplayOptions& options) {
  return {.flavour = config.runner,
          .v1_copy_path = options.v1_copy_path,
          .v2_table_rows = options.v2_table_rows,
          .deferred_postprocess = options.deferred_postprocess};
}

model::SchedulerContract contract_of(const scenarios::TraceHeader& header,
                                     const ReplayOptions& options) {
  model::SchedulerContract c = header.contract;
  c.unordered_writer = c.unordered_writer || options.unordered_writer;
  return c;
}

} // namespace

ReplayResult replay_trace(scenarios::TraceReader& reader, const ReplayOptions& options) {
  const scenarios::TraceHeader& header = reader.header();
  ReplayResult result{.trace = {},
                      .preset = header.preset,
                      .config = header.config,
                      .layers_max = options.layers_max};
  const model::Layout layout =
      replay_layout(reader, options, result.config, &result.trace_layers);
  const oracle::engine::RunnerOptions oracle_options = oracle_options_of(result.config, options);
  oracle::engine::Replayer oracle(layout, oracle_options, 64, options.structures,
                                  header.async_scheduling, contract_of(header, options));
  require_covered(options.external, oracle_options, result.config.mode);
  gpu::engine::EngineRunner backend(
      layout, backend_runner_options(oracle_options, options.runner_mutant, options.kernel_mutant),
      options.executor, options.external);
  TracedSteps steps(reader, oracle);
  LockstepHooks hooks{.arena_compare = options.arena_compare, .stop_on_interrupt = true};
  if (options.on_step)
    hooks.on_held = [&options, &oracle](std::int64_t) { options.on_step(oracle.stats().steps); };
  std::int64_t expectations_checked = 0;
  hooks.check_step = [&](const OracleStep& o) {
    for (Difference& d : check_expectations(steps, o, expectations_checked))
      result.expectations_failed.push_back(
          {.line = reader.line_number(), .difference = std::move(d)});
  };
  StepViewer viewer;
  if (options.on_view) {
    hooks.before_step = [&] { viewer.before(steps); };
    hooks.on_step = [&](const OracleStep& o) { options.on_view(viewer.after(steps, o)); };
  }
  const LockstepResult r = run_lockstep(steps, backend, options.steps_max, hooks);
  if (r.failure && options.on_failure)
    options.on_failure(*r.failure, oracle.runner().states().arenas(), backend.arenas());
  result.stats = oracle.stats();
  result.steps_compared = r.steps_compared;
  result.bytes_compared = r.bytes_compared;
  result.arenas = r.arenas;
  result.interrupted = r.interrupted;
  result.coverage = r.coverage;
  result.finding = r.finding;
  result.expectations_checked = expectations_checked;
  if (r.failure && !r.finding) result.mismatch = r.failure;
  if (r.failure) {
    result.stop_step = r.failure->step;
    result.stop_line = reader.line_number();
  }
  if (!r.failure && !result.expectations_failed.empty()) {
    const ReplayResult::FailedExpectation& first = result.expectations_failed.front();
    result.stop_step = first.difference.step;
    result.stop_line = first.line;
  }
  return result;
}

ReplayResult replay_file(const std::filesystem::path& trace, const ReplayOptions& options) {
  scenarios::TraceReader reader(trace);
  ReplayResult result = replay_trace(reader, options);
  result.trace = trace.string();
  return result;
}

std::int64_t view_trace_file(const std::filesystem::path& trace, const ReplayOptions& options) {
  scenarios::TraceReader reader(trace);
  model::CacheConfig config;
  const model::Layout layout = replay_layout(reader, options, config);
  oracle::engine::Replayer oracle(layout, oracle_options_of(config, options), 64,
                                  options.structures, reader.header().async_scheduling,
                                  contract_of(reader.header(), options));
  TracedSteps steps(reader, oracle);
  StepViewer viewer;
  std::int64_t viewed = 0;
  for (;;) {
    viewer.before(steps);
    const std::optional<OracleStep> o = steps.next();
    if (!o) break;
    ++viewed;
    if (options.on_view) options.on_view(viewer.after(steps, *o));
    if (o->finding) break;
  }
  return viewed;
}

} // namespace mc::harness
