#include "scenarios/replay/simulate.h"

#include "model/errors.h"
#include "scenarios/replay/replay.h"
#include "scenarios/trace.h"

#include <fmt/format.h>

#include <memory>

namespace mc::scenarios {
namespace {

TraceHeader record_header(const SimulationOptions& o, const model::CacheConfig& config) {
  TraceHeader header{.config = config, .preset = o.preset, .layout_spec = o.campaign.spec};
  header.source = {{"recorder", "mambacheck run"},
                   {"version", MC_VERSION},
                   {"seed", o.campaign.seed},
                   {"requests", o.requests.empty() ? o.campaign.num_requests
                                                   : static_cast<std::int64_t>(o.requests.size())},
                   {"workload", o.requests.empty() ? "generated" : "imported"}};
  return header;
}

} // namespace

fuzz::EngineCampaignResult simulate(const SimulationOptions& o) {
  const fuzz::EngineCampaignOptions& c = o.campaign;
  model::CacheConfig config = c.config;
  config.runner = c.engine.runner.flavour;
  const model::Layout layout = model::build_layout(config, c.spec);
  oracle::engine::validate_options(c.engine, layout);
  if (c.num_steps < 0 || c.num_steps > oracle::engine::kStepsMax)
    model::fail_input("--steps must be in 0..{}, got {}", oracle::engine::kStepsMax, c.num_steps);
  std::vector<oracle::engine::RequestSpec> requests = o.requests;
  if (requests.empty()) {
    if (c.num_requests < 1 || c.num_requests > oracle::engine::kRequestsMax)
      model::fail_input("--requests must be in 1..{}, got {}", oracle::engine::kRequestsMax,
                        c.num_requests);
    oracle::engine::Rng rng(c.seed);
    requests = oracle::engine::generate_workload(c.engine.workload, c.num_requests,
                                                 model::kSpecTokensMax + 2, rng);
  }
  const auto num_requests = static_cast<std::int64_t>(requests.size());
  std::unique_ptr<TraceWriter> writer;
  if (o.record) writer = std::make_unique<TraceWriter>(*o.record, record_header(o, config));
  oracle::engine::Engine engine(layout, std::move(requests), c.seed, c.engine);
  gpu::engine::EngineRunner gpu(
      layout, gpu_runner_options(config.runner, c.engine.runner.v1_copy_path, o.runner_mutant),
      c.executor);
  fuzz::EngineCampaignResult result;
  for (std::int64_t i = 0; i < c.num_steps; ++i) {
    const bool more = engine.step();
    result.report = engine.report();
    if (writer) writer->write(engine.last_step());
    if (result.report.first_finding) {
      result.finding = result.report.first_finding;
      break;
    }
    const model::Step& step = engine.last_step();
    const gpu::engine::StepRecord gpu_record = gpu.execute(step);
    std::optional<std::string> diff =
        fuzz::compare_step(layout, step, engine.last_record(), gpu_record);
    if (!diff)
      diff = fuzz::compare_arenas(layout, engine.runner().arenas(), gpu.arenas(),
                                  result.bytes_compared);
    ++result.steps_compared;
    if (diff) {
      result.mismatch = fmt::format("step {}: {}", step.index, *diff);
      break;
    }
    if (!more) break;
  }
  result.report.requests = num_requests;
  return result;
}

} // namespace mc::scenarios
