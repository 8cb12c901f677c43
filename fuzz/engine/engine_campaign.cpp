// run_engine_campaign and the per-step comparison (engine_campaign.h).
#include "fuzz/engine/engine_campaign.h"

#include "model/errors.h"
#include "oracle/engine/workload.h"

#include <fmt/format.h>

namespace mc::fuzz {
namespace {

std::string name_tensor(const model::Layout& layout, std::int32_t tensor) {
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  return fmt::format("tensor {} (group {}, layer {}, state {} '{}')", tensor, t.group, t.layer,
                     t.state, t.shape.name);
}

std::string describe_decision(const model::CopyDecision& d) {
  return fmt::format(
      "row {} slot {} tensor {} cols {}->{} bias {} blocks {}->{} offset {} bytes {}", d.batch_row,
      d.slot, d.tensor, d.src_col, d.dst_col, d.token_bias, d.src_block_id, d.dst_block_id,
      d.src_byte_offset, d.bytes);
}

std::optional<std::string> compare_arrays(const model::RequestArrays& o,
                                          const model::RequestArrays& g) {
  const std::pair<const char*, std::vector<std::int32_t> model::RequestArrays::*> fields[] = {
      {"idx_mapping", &model::RequestArrays::idx_mapping},
      {"num_accepted", &model::RequestArrays::num_accepted},
      {"state_idx", &model::RequestArrays::state_idx},
      {"num_scheduled", &model::RequestArrays::num_scheduled},
      {"num_computed", &model::RequestArrays::num_computed},
      {"num_draft", &model::RequestArrays::num_draft},
      {"new_num_computed", &model::RequestArrays::new_num_computed},
      {"query_start_loc", &model::RequestArrays::query_start_loc},
      {"src_col", &model::RequestArrays::src_col},
      {"token_bias", &model::RequestArrays::token_bias},
      {"num_accepted_out", &model::RequestArrays::num_accepted_out}};
  for (const auto& [name, field] : fields) {
    const auto& a = o.*field;
    const auto& b = g.*field;
    if (a.size() != b.size())
      return fmt::format("array {}: {} entries on the oracle, {} on the backend", name, a.size(),
                         b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        return fmt::format("array {}[{}]: oracle {}, backend {}", name, i, a[i], b[i]);
  }
  return std::nullopt;
}

std::optional<std::string> compare_launch(const model::Step& step,
                                          const oracle::engine::LaunchRecord& o,
                                          const gpu::engine::LaunchRecord& g) {
  if (o.kind != g.kind)
    return fmt::format("kind: oracle {}, backend {}", model::to_string(o.kind),
                       model::to_string(g.kind));
  if (o.status != g.status || o.unsupported_reason != g.unsupported_reason)
    return fmt::format("status: oracle '{}', backend '{}'", o.unsupported_reason,
                       g.unsupported_reason);
  const std::size_t n = std::max(o.decisions.size(), g.decisions.size());
  for (std::size_t i = 0; i < n; ++i) {
    const bool has_o = i < o.decisions.size();
    const bool has_g = i < g.decisions.size();
    if (has_o && has_g && o.decisions[i] == g.decisions[i]) continue;
    const model::CopyDecision& any = has_o ? o.decisions[i] : g.decisions[i];
    const auto row = static_cast<std::size_t>(any.batch_row);
    return fmt::format("decision {} (request {}): oracle {}, backend {}", i,
                       row < step.scheduled.size() ? step.scheduled[row].req_id : "?",
                       has_o ? describe_decision(o.decisions[i]) : "none",
                       has_g ? describe_decision(g.decisions[i]) : "none");
  }
  return compare_arrays(o.requests, g.requests);
}

} // namespace

std::optional<std::string> compare_step(const model::Layout& /*layout*/, const model::Step& step,
                                        const oracle::engine::StepRecord& o,
                                        const gpu::engine::StepRecord& g) {
  if (!g.rejected.empty()) return fmt::format("the backend rejected a launch: {}", g.rejected);
  if (o.launches.size() != g.launches.size())
    return fmt::format("launches: oracle ran {}, backend {}", o.launches.size(), g.launches.size());
  for (std::size_t i = 0; i < o.launches.size(); ++i)
    if (auto d = compare_launch(step, o.launches[i], g.launches[i]))
      return fmt::format("launch {} ({}): {}", i, model::to_string(o.launches[i].kind), *d);
  return std::nullopt;
}

std::optional<std::string> compare_arenas(const model::Layout& layout,
                                          const std::vector<model::Arena>& oa,
                                          const std::vector<model::Arena>& ga,
                                          std::int64_t& bytes_compared) {
  MC_ASSERT(oa.size() == ga.size());
  for (std::size_t i = 0; i < oa.size(); ++i) {
    const std::int64_t at = oa[i].first_difference(ga[i]);
    bytes_compared += oa[i].size_bytes();
    if (at < 0) continue;
    std::int64_t end = at;
    while (end < oa[i].size_bytes() && oa[i].data()[end] != ga[i].data()[end])
      ++end;
    for (std::size_t t = 0; t < layout.tensors.size(); ++t) {
      const model::StateTensor& st = layout.tensors[t];
      if (st.arena != static_cast<std::int32_t>(i) || at < st.offset_bytes) continue;
      const std::int64_t block = (at - st.offset_bytes) / st.block_stride_bytes;
      const std::int64_t in_block = at - st.block_offset_bytes(block);
      if (in_block >= st.natural_bytes) continue;
      return fmt::format("arena {}: {}, block {}, bytes [{}, {}) of the block differ", i,
                         name_tensor(layout, static_cast<std::int32_t>(t)), block, in_block,
                         in_block + std::min(end - at, st.natural_bytes - in_block));
    }
    return fmt::format("arena {}: bytes [{}, {}) differ outside every state", i, at, end);
  }
  return std::nullopt;
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
