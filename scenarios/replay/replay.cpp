#include "scenarios/replay/replay.h"

#include "fuzz/engine/engine_campaign.h"
#include "model/errors.h"

#include <fmt/format.h>

namespace mc::scenarios {

bool kernel_mutants_supported() {
  return true;
}

gpu::engine::RunnerOptions gpu_runner_options(model::RunnerFlavour flavour,
                                              oracle::engine::V1CopyPath path,
                                              gpu::engine::RunnerMutant mutant) {
  return gpu::engine::RunnerOptions{.flavour = flavour,
                                    .v1_copy_path = path == oracle::engine::V1CopyPath::precopy
                                                        ? gpu::engine::V1CopyPath::precopy
                                                        : gpu::engine::V1CopyPath::batch_copy,
                                    .mutant = mutant};
}

std::string ReplayResult::summary() const {
  const std::string where = fmt::format("step {} (line {})", stop_step, stop_line);
  if (finding) return fmt::format("FINDING at {}: {}", where, finding->message);
  if (mismatch) return fmt::format("MISMATCH at {}: {}", where, *mismatch);
  return fmt::format("held: {} steps, {} request-steps, oracle and backend agree on every step",
                     stats.steps, stats.request_steps);
}

ReplayResult replay_trace(TraceReader& reader, const ReplayOptions& options) {
  const TraceHeader& header = reader.header();
  ReplayResult result{.trace = {}, .preset = header.preset, .config = header.config};
  result.config.runner = options.runner.value_or(header.config.runner);
  const model::Layout layout = model::build_layout(result.config, header.layout_spec);
  oracle::engine::RunnerOptions oracle_options{.flavour = result.config.runner,
                                               .v1_copy_path = options.v1_copy_path};
  // The steps are given: only what the engine model can run is checked, never the options
  // of a scheduler (token budget, arrivals) that generated steps would need.
  try {
    oracle::engine::validate_geometry(layout);
  } catch (const model::InputError& e) {
    model::fail_input("{}:1: config.{}", reader.name(), e.what());
  }
  oracle::engine::Replayer oracle(layout, oracle_options);
  gpu::engine::RunnerOptions gpu_options =
      gpu_runner_options(result.config.runner, options.v1_copy_path, options.runner_mutant);
  gpu_options.kernel_mutant = options.kernel_mutant;
  gpu::engine::EngineRunner gpu(layout, gpu_options, options.executor);
  while (options.steps_max < 0 || result.stats.steps < options.steps_max) {
    std::optional<model::Step> step = reader.next();
    if (!step) break;
    result.stop_step = step->index;
    result.stop_line = reader.line_number();
    result.finding = oracle.step(*step);
    result.stats = oracle.stats();
    if (result.finding) return result;
    const gpu::engine::StepRecord gpu_record = gpu.execute(*step);
    std::optional<std::string> diff =
        fuzz::compare_step(layout, *step, oracle.last_record(), gpu_record);
    if (!diff)
      diff = fuzz::compare_arenas(layout, oracle.runner().arenas(), gpu.arenas(),
                                  result.bytes_compared);
    ++result.steps_compared;
    if (diff) {
      result.mismatch = std::move(diff);
      return result;
    }
    if (options.on_step) options.on_step(result.stats.steps);
  }
  result.stop_step = -1;
  result.stop_line = -1;
  return result;
}

ReplayResult replay_file(const std::filesystem::path& trace, const ReplayOptions& options) {
  TraceReader reader(trace);
  ReplayResult result = replay_trace(reader, options);
  result.trace = trace.string();
  return result;
}

} // namespace mc::scenarios
