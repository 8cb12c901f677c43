#include "bench/engine_bench.h"

#include "harness/managed_steps.h"
#include "model/cpu_time.h"
#include "model/errors.h"
#include "model/presets.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace mc::oracle::engine {
namespace {

void require_range(std::int64_t value, std::int64_t lo, std::int64_t hi, const char* option) {
  if (value < lo || value > hi)
    model::fail_input("bench --engine: {} must be in {}..{}, got {}", option, lo, hi, value);
}

// Defaults by preset size. Tiny states: thousands of short requests, up to 256 running, many
// arriving per step, long enough outputs that the running set stays full. Production states
// (B = 256, megabytes per block): fewer, longer requests, and a pool that fits host memory.
void apply_defaults(const model::Preset& preset, EngineBenchCase& c) {
  WorkloadOptions& w = c.engine.workload;
  SchedulerOptions& s = c.engine.scheduler;
  w.arrivals_per_step_max = 64;
  if (preset.tiny) {
    c.steps = 100'000;
    c.requests = 20'000;
    s.max_running = 256;
    s.token_budget = 4096;
    w.prompt_len_max = 40;
    w.output_len_max = 200;
  } else {
    c.steps = 2'000;
    c.requests = 128;
    s.max_running = 32;
    s.token_budget = 8192;
    w.prompt_len_max = 1024;
    w.output_len_max = 128;
  }
}

void apply_layers(std::int32_t layers, model::LayoutSpec& spec) {
  std::int32_t most = 0;
  for (const model::GroupSpec& g : spec.groups)
    most = std::max(most, g.num_layers);
  require_range(layers, 1, most, "--layers");
  for (model::GroupSpec& g : spec.groups)
    g.num_layers = std::min(g.num_layers, layers);
}

// The bench's loop with the steps planned through a block manager under test.
EngineBenchResult run_managed(const model::Layout& layout, std::vector<RequestSpec> requests,
                              KvManager& manager, EngineBenchResult r) {
  const EngineBenchCase& c = r.bench_case;
  harness::ManagedSteps steps(layout, std::move(requests), c.seed, c.engine, manager);
  const double cpu0 = model::cpu_seconds().total();
  const auto wall0 = std::chrono::steady_clock::now();
  std::optional<Finding> finding;
  std::int64_t run = 0;
  for (; run < c.steps && !finding; ++run) {
    std::optional<harness::OracleStep> o = steps.next();
    if (!o) break;
    r.rows_max = std::max(r.rows_max, static_cast<std::int64_t>(o->step.scheduled.size()));
    finding = o->finding;
    if (o->last) {
      ++run;
      break;
    }
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.cpu_seconds = model::cpu_seconds().total() - cpu0;
  r.report = steps.report(run, finding);
  r.report.requests = c.requests;
  return r;
}

} // namespace

EngineBenchCase make_engine_bench_case(const std::string& preset_name,
                                       const EngineBenchOptions& o) {
  const model::Preset& preset = model::find_preset(preset_name);
  EngineBenchCase c{.preset = preset.name, .config = preset.config, .spec = preset.spec};
  apply_defaults(preset, c);
  c.config.runner = o.runner;
  c.engine.runner.flavour = o.runner;
  if (o.reference) c.engine.structures = Structures::reference;
  c.seed = o.seed;
  if (o.steps) c.steps = *o.steps;
  if (o.requests) c.requests = *o.requests;
  if (o.max_running) c.engine.scheduler.max_running = *o.max_running;
  if (o.token_budget) c.engine.scheduler.token_budget = *o.token_budget;
  require_range(c.steps, 1, kStepsMax, "--steps");
  require_range(c.requests, 1, kRequestsMax, "--requests");
  require_range(c.engine.scheduler.max_running, 1, kRunningMax, "--max-running");
  require_range(c.engine.scheduler.token_budget, 1, kTokenBudgetMax, "--token-budget");
  if (o.num_spec) {
    require_range(*o.num_spec, 0, model::kSpecTokensMax, "--num-spec");
    c.config.num_spec_tokens = *o.num_spec;
    c.config.num_spec_blocks = *o.num_spec; // align: one spec block per draft
  }
  if (o.layers || !preset.tiny) // a production block is megabytes: two layers per group
    apply_layers(o.layers.value_or(2), c.spec);
  // Room for every running request's window (running block, spec blocks, the one being
  // freed) plus cached prefix blocks; a smaller pool preempts more.
  c.spec.num_blocks = c.engine.scheduler.max_running * (4 + c.config.num_spec_blocks) + 64;
  if (o.pool_blocks) {
    require_range(*o.pool_blocks, 4, model::kBlocksMax, "--pool-blocks");
    c.spec.num_blocks = *o.pool_blocks;
  }
  const model::Layout layout = model::build_layout(c.config, c.spec);
  const std::int64_t arena_bytes = layout.total_bytes();
  if (arena_bytes > kEngineBenchArenaBytesMax)
    model::fail_input("bench --engine: {} needs {} bytes of arenas (more than {}); lower "
                      "--pool-blocks or --layers",
                      c.preset, arena_bytes, kEngineBenchArenaBytesMax);
  validate_options(c.engine, layout);
  return c;
}

EngineBenchResult run_engine_bench(const EngineBenchCase& c, KvManager* manager) {
  auto rng = model::SplitMix64::from_seed(c.seed);
  std::vector<RequestSpec> requests =
      generate_workload(c.engine.workload, c.requests, model::kSpecTokensMax + 2, rng);
  model::CacheConfig config = c.config;
  model::LayoutSpec spec = c.spec;
  if (manager != nullptr) harness::fit_to_manager(config, spec, requests, c.engine, *manager);
  const model::Layout layout = model::build_layout(config, spec);
  validate_options(c.engine, layout);
  EngineBenchResult r{.bench_case = c};
  for (const model::GroupSpec& g : c.spec.groups)
    r.num_layers += g.num_layers;
  r.arena_bytes = layout.total_bytes();
  if (manager != nullptr) return run_managed(layout, std::move(requests), *manager, std::move(r));
  Engine engine(layout, std::move(requests), c.seed, c.engine);
  const double cpu0 = model::cpu_seconds().total();
  const auto wall0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < c.steps; ++i) {
    const bool more = engine.step();
    r.rows_max =
        std::max(r.rows_max, static_cast<std::int64_t>(engine.last_step().scheduled.size()));
    if (!more) break;
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.cpu_seconds = model::cpu_seconds().total() - cpu0;
  r.report = engine.report();
  r.report.requests = c.requests;
  return r;
}

std::string describe(const EngineBenchResult& r) {
  const EngineBenchCase& c = r.bench_case;
  const EngineReport& e = r.report;
  const double wall = std::max(r.wall_seconds, 1e-9);
  const double cpu = std::max(r.cpu_seconds, 1e-9);
  const auto steps = static_cast<double>(e.steps);
  const auto request_steps = static_cast<double>(e.request_steps);
  std::string s = fmt::format(
      "engine bench {}: runner {}, B {}, num_spec {}, {} layers, pool {} blocks ({} bytes of "
      "arenas){}\n",
      c.preset, model::to_string(c.config.runner), c.config.mamba_block_size,
      c.config.num_spec_tokens, r.num_layers, c.spec.num_blocks, r.arena_bytes,
      c.engine.structures == Structures::reference ? ", reference structures" : "");
  s += fmt::format("  workload: requests {}, max_running {}, token_budget {}, prompts {}..{}, "
                   "outputs {}..{}, steps at most {}, seed {}\n",
                   c.requests, c.engine.scheduler.max_running, c.engine.scheduler.token_budget,
                   c.engine.workload.prompt_len_min, c.engine.workload.prompt_len_max,
                   c.engine.workload.output_len_min, c.engine.workload.output_len_max, c.steps,
                   c.seed);
  s += fmt::format("  steps {}, request-steps {} (rows per step: mean {:.1f}, max {}), tokens {}\n",
                   e.steps, e.request_steps, request_steps / std::max(steps, 1.0), r.rows_max,
                   e.tokens);
  s += fmt::format("  finished {}, preemptions {}, prefix hits {}, launches {}, bytes checked by "
                   "invariants {}\n",
                   e.finished, e.preemptions, e.prefix_hits, e.launches, e.bytes_checked);
  std::string copies;
  for (const auto& [kind, count] : e.copies_by_kind)
    copies += fmt::format("{}{} {}", copies.empty() ? "" : ", ", kind, count);
  s += fmt::format("  copy decisions by launch kind: {}\n", copies.empty() ? "none" : copies);
  s += fmt::format("  wall {:.3f} s: {:.0f} steps/s, {:.0f} request-steps/s; cpu {:.3f} s: {:.0f} "
                   "steps/s, {:.0f} request-steps/s\n",
                   r.wall_seconds, steps / wall, request_steps / wall, r.cpu_seconds, steps / cpu,
                   request_steps / cpu);
  if (e.first_finding) s += fmt::format("  FINDING: {}\n", e.first_finding->message);
  return s;
}

} // namespace mc::oracle::engine
