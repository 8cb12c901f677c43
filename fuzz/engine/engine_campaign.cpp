// run_engine_campaign and the per-step comparison (engine_campaign.h).
#include "fuzz/engine/engine_campaign.h"
#include "fuzz/engine/engine_case.h"

#include "model/errors.h"
#include "oracle/engine/workload.h"

#include <fmt/format.h>

namespace mc::fuzz {
std::optional<std::string> compare_step(const model::Layout& layout, const model::Step& step,
                                        const oracle::engine::StepRecord& o,
                                        const gpu::engine::StepRecord& g) {
  // The wrapper keeps the campaign's "step N: " prefix out of the text it returns.
  std::optional<EngineDifference> d = difference_of_step(layout, step, o, g);
  if (!d) return std::nullopt;
  const std::string prefix = fmt::format("step {}: ", step.index);
  return d->text.starts_with(prefix) ? d->text.substr(prefix.size()) : d->text;
}

std::optional<std::string> compare_arenas(const model::Layout& layout,
                                          const std::vector<model::Arena>& oa,
                                          const std::vector<model::Arena>& ga,
                                          std::int64_t& bytes_compared) {
  std::optional<EngineDifference> d = difference_of_arenas(layout, oa, ga, bytes_compared);
  if (!d) return std::nullopt;
  return d->text;
}

EngineCampaignResult run_engine_campaign(const EngineCampaignOptions& options) {
  model::CacheConfig config = options.config;
  config.runner = options.engine.runner.flavour;
  const model::Layout layout = model::build_layout(config, options.spec);
  oracle::engine::validate_options(options.engine, layout);
  if (options.num_steps < 0 || options.num_steps > oracle::engine::kStepsMax)
    model::fail_input("--steps must be in 0..{}, got {}", oracle::engine::kStepsMax,
                      options.num_steps);
  if (options.num_requests < 1 || options.num_requests > oracle::engine::kRequestsMax)
    model::fail_input("--requests must be in 1..{}, got {}", oracle::engine::kRequestsMax,
                      options.num_requests);
  oracle::engine::Rng rng(options.seed);
  std::vector<oracle::engine::RequestSpec> requests = oracle::engine::generate_workload(
      options.engine.workload, options.num_requests, model::kSpecTokensMax + 2, rng);
  oracle::engine::Engine engine(layout, std::move(requests), options.seed, options.engine);
  const gpu::engine::RunnerOptions gpu_options{
      .flavour = options.engine.runner.flavour,
      .v1_copy_path = options.engine.runner.v1_copy_path == oracle::engine::V1CopyPath::precopy
                          ? gpu::engine::V1CopyPath::precopy
                          : gpu::engine::V1CopyPath::batch_copy,
      .row_stride_extra = options.engine.runner.row_stride_extra};
  gpu::engine::EngineRunner gpu_runner(layout, gpu_options, options.executor);
  EngineCampaignResult result;
  for (std::int64_t i = 0; i < options.num_steps; ++i) {
    const bool more = engine.step();
    result.report = engine.report();
    if (result.report.first_finding) {
      result.finding = result.report.first_finding;
      break;
    }
    const model::Step& step = engine.last_step();
    const gpu::engine::StepRecord gpu_record = gpu_runner.execute(step);
    std::optional<std::string> diff = compare_step(layout, step, engine.last_record(), gpu_record);
    if (!diff)
      diff = compare_arenas(layout, engine.runner().arenas(), gpu_runner.arenas(),
                            result.bytes_compared);
    ++result.steps_compared;
    if (diff) {
      result.mismatch = fmt::format("step {}: {}", step.index, *diff);
      break;
    }
    if (!more) break;
  }
  result.report.requests = options.num_requests;
  return result;
}

} // namespace mc::fuzz
