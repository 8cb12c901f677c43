// `mambacheck bench [--preset P...] [--requests N...] [--iters N] [--json FILE]`: CUDA-event
// timings of the kernels next to cudaMemcpyAsync and a batched memcpy
// (bench/kernel_bench.h). Exit 3 without CUDA or a device.
//
// `mambacheck bench --engine [--preset P...] [--steps N] [--requests N] [--max-running N]
// [--token-budget N] [--pool-blocks N] [--num-spec N] [--layers N] [--runner v1|v2]
// [--reference] [--json FILE]`: the oracle engine alone, one core, every invariant on
// (bench/engine_bench.h); works in every build.
//
// `mambacheck bench --cases N [--seed S] [--max-size M] [--backend host|cuda] [--json FILE]`:
// where the time of a kernel campaign's case goes, phase by phase, in this process
// (bench/case_bench.h); works in every build (cuda where a device is).
//
// `mambacheck bench --external COMMAND [--baseline COMMAND] [--max-slowdown X] [--preset P...]
// [--requests N...] [--iters N] [--sets N] [--out DIR] [--json FILE]`: kernels in a worker
// process timed on the same cases, the ratio to a baseline worker's, exit 1 on a regression
// (bench/external_bench.h); works in every build (this build's kernels beside them with CUDA).
#include "backends/backend.h"
#include "backends/block_manager_worker.h"
#include "backends/external_backend.h"
#include "bench/case_bench.h"
#include "bench/engine_bench.h"
#include "bench/external_bench.h"
#include "bench/kernel_bench.h"
#include "cli/commands.h"
#include "cli/external_option.h"
#include "cli/output_paths.h"
#include "model/errors.h"
#include "model/presets.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

namespace mc::cli {
namespace {

constexpr std::int32_t kRequestsMax = 16384;
constexpr std::int32_t kItersMax = 100000;

// The options the kernel bench and the external bench share; exit 2 on a bad one.
void check_kernel_bench_options(const gpu::BenchOptions& options) {
  check_output_file("--json", options.json_path);
  for (const std::string& p : options.presets)
    (void)model::find_preset(p); // exit 2 if unknown
  for (const std::int32_t n : options.requests)
    check_option_within("bench: --requests", n, 1, kRequestsMax);
  check_option_within("bench: --iters", options.iters, 1, kItersMax);
  check_option_within("bench: --sets", options.sets, 1, gpu::kBenchSetsMax);
}

int run_bench_command(const gpu::BenchOptions& options) {
  check_kernel_bench_options(options);
  return gpu::run_bench(options, std::cout);
}

// What the engine bench takes beyond the kernel bench's --preset, --requests and --json; an
// option not given keeps the preset's default (bench/engine_bench.h).
struct EngineArgs {
  oracle::engine::EngineBenchOptions options; // its presets and requests: the kernel bench's
  std::string runner = "v1";
  std::string block_manager; // plan through this block manager under test
  double block_manager_timeout = backends::kBlockManagerTimeoutSecondsDefault;
};

nlohmann::json to_json(const oracle::engine::EngineBenchResult& r) {
  const oracle::engine::EngineBenchCase& c = r.bench_case;
  const oracle::engine::EngineReport& e = r.report;
  const double wall = std::max(r.wall_seconds, 1e-9);
  return {{"preset", c.preset},
          {"runner", model::to_string(c.config.runner)},
          {"mamba_block_size", c.config.mamba_block_size},
          {"num_spec", c.config.num_spec_tokens},
          {"layers", r.num_layers},
          {"pool_blocks", c.spec.num_blocks},
          {"arena_bytes", r.arena_bytes},
          {"requests", c.requests},
          {"max_running", c.engine.scheduler.max_running},
          {"token_budget", c.engine.scheduler.token_budget},
          {"steps_max", c.steps},
          {"seed", c.seed},
          {"steps", e.steps},
          {"request_steps", e.request_steps},
          {"rows_max", r.rows_max},
          {"tokens", e.tokens},
          {"finished", e.finished},
          {"preemptions", e.preemptions},
          {"prefix_hits", e.prefix_hits},
          {"bytes_checked", e.bytes_checked},
          {"wall_seconds", r.wall_seconds},
          {"cpu_seconds", r.cpu_seconds},
          {"steps_per_second", static_cast<double>(e.steps) / wall},
          {"request_steps_per_second", static_cast<double>(e.request_steps) / wall},
          {"finding", e.first_finding ? nlohmann::json(e.first_finding->message) : nullptr}};
}

int run_engine_bench_command(const gpu::BenchOptions& k, const EngineArgs& a) {
  check_output_file("--json", k.json_path);
  oracle::engine::EngineBenchOptions o = a.options;
  o.presets = k.presets;
  o.runner = model::parse_runner(a.runner);
  if (k.requests.size() > 1)
    model::fail_input("bench --engine: --requests takes one number, got {}", k.requests.size());
  if (!k.requests.empty()) o.requests = k.requests[0];
  if (o.presets.empty()) o.presets = oracle::engine::kEngineBenchPresets;
  std::vector<oracle::engine::EngineBenchCase> cases;
  for (const std::string& p : o.presets) // every option checked before anything runs
    cases.push_back(oracle::engine::make_engine_bench_case(p, o));
  const std::unique_ptr<backends::BlockManagerWorker> manager =
      start_block_manager(a.block_manager, a.block_manager_timeout);
  nlohmann::json report = nlohmann::json::array();
  int rc = kExitOk;
  for (const oracle::engine::EngineBenchCase& c : cases) {
    oracle::engine::EngineBenchResult r;
    try {
      r = oracle::engine::run_engine_bench(c, manager.get());
    } catch (const oracle::engine::KvManagerRefusal& e) {
      model::fail_input("--block-manager: the manager refuses the sizes of {}: {}", c.preset,
                        e.reason);
    } catch (const oracle::engine::KvManagerFault& e) {
      throw model::EnvironmentError(fmt::format("--block-manager: {}", e.message));
    }
    std::cout << oracle::engine::describe(r) << std::flush;
    report.push_back(to_json(r));
    if (r.report.first_finding) rc = kExitMismatch;
  }
  write_json_file("--json", k.json_path, report);
  return rc;
}

struct CaseArgs {
  std::int64_t cases = 0;
  int max_size = 30;
  std::string backend = "host";
};

int run_case_bench_command(const gpu::BenchOptions& k, const CaseArgs& a, std::uint64_t seed) {
  check_output_file("--json", k.json_path);
  check_option_range("bench --cases", a.cases, 1, 10'000'000);
  check_option_range("bench --max-size", a.max_size, 0, 100);
  const backends::Backend backend = backends::parse_backend(a.backend);
  if (backend == backends::Backend::oracle)
    model::fail_input("bench --backend: host or cuda (the oracle is timed on its own)");
  backends::require_backend(backend);
  bench::CaseBenchOptions o{.seed = seed,
                            .cases = a.cases,
                            .max_size = a.max_size,
                            .backend = backends::launch_runner(backend),
                            .backend_name = a.backend};
  if (backend == backends::Backend::cuda) o.gen.weights.grid *= 2; // as `fuzz` draws for cuda
  const bench::CaseBenchResult r = bench::run_case_bench(o);
  std::cout << bench::describe(o, r) << std::flush;
  write_json_file("--json", k.json_path, bench::to_json(o, r));
  return r.failed > 0 ? kExitMismatch : kExitOk;
}

struct ExternalArgs {
  std::string command;
  std::string baseline;
  std::optional<double> max_slowdown; // --max-slowdown: not given, no limit
  double timeout_seconds = backends::kExternalTimeoutSecondsDefault;
  std::string out = "mc-out/bench-external";
};

constexpr double kMaxSlowdownMax = 1000;

int run_external_bench_command(const gpu::BenchOptions& k, const ExternalArgs& a) {
  check_kernel_bench_options(k);
  if (a.max_slowdown && !(*a.max_slowdown >= 1 && *a.max_slowdown <= kMaxSlowdownMax))
    model::fail_input("bench: --max-slowdown: expected a ratio in 1..{}, got {}", kMaxSlowdownMax,
                      *a.max_slowdown);
  check_timeout_option("--external-timeout", a.timeout_seconds);
  create_output_dir("--out", a.out);
  bench::ExternalBenchResult result;
  try {
    result = bench::run_external_bench({.command = a.command,
                                        .baseline_command = a.baseline,
                                        .max_slowdown = a.max_slowdown,
                                        .presets = k.presets,
                                        .requests = k.requests,
                                        .iters = k.iters,
                                        .sets = k.sets,
                                        .timeout_seconds = a.timeout_seconds,
                                        .work_dir = a.out},
                                       std::cout);
  } catch (const bench::ExternalBenchKernelFailure& failure) {
    std::cerr << "mambacheck: " << failure.message << "\n";
    return kExitMismatch;
  }
  write_json_file("--json", k.json_path, result.report);
  if (a.max_slowdown)
    std::cout << (result.regression
                      ? fmt::format("REGRESSION: {} of {} cases slower than {}x the baseline\n",
                                    result.report["regressions"].size(),
                                    result.report["cases"].size(), *a.max_slowdown)
                      : fmt::format("no case slower than {}x the baseline\n", *a.max_slowdown));
  return result.regression ? kExitMismatch : kExitOk;
}

} // namespace

// The engine bench's own options (not given: the preset's default); each needs --engine
// (`flag`).
void add_engine_bench_options(CLI::App& cmd, EngineArgs& engine, CLI::Option* flag) {
  oracle::engine::EngineBenchOptions& o = engine.options;
  cmd.add_option("--steps", o.steps, "--engine: steps at most")->needs(flag);
  cmd.add_option("--max-running", o.max_running,
                 "--engine: running requests at most (max_num_seqs)")
      ->needs(flag);
  cmd.add_option("--token-budget", o.token_budget,
                 "--engine: tokens per step (max_num_batched_tokens)")
      ->needs(flag);
  cmd.add_option("--pool-blocks", o.pool_blocks, "--engine: blocks per state tensor")->needs(flag);
  cmd.add_option("--num-spec", o.num_spec, "--engine: speculative tokens per decode, 0..16")
      ->needs(flag);
  cmd.add_option("--layers", o.layers,
                 "--engine: layers per group, cut from the preset's (default: all for tiny "
                 "presets, 2 for production ones)")
      ->needs(flag);
  cmd.add_option("--runner", engine.runner, "--engine: v1 or v2 (default v1)")->needs(flag);
  add_block_manager_options(cmd, engine.block_manager, engine.block_manager_timeout);
  cmd.add_flag("--reference", o.reference,
               "--engine: run the oracle on its plain structures instead of its fast ones (the "
               "same counters, slower; oracle/engine/structures.h)")
      ->needs(flag);
}

// --external and what goes with it; it excludes the options in `excluded`. Returns --external.
CLI::Option* add_external_bench_options(CLI::App& cmd, ExternalArgs& external,
                                        std::initializer_list<CLI::Option*> excluded) {
  CLI::Option* external_option = cmd.add_option(
      "--external", external.command,
      "Time kernels in a worker command on the bench cases, e.g. 'python3 -m "
      "mambacheck_adapter.worker --kernels MODULE' (the worker times its own launches)");
  for (CLI::Option* other : excluded)
    external_option->excludes(other);
  CLI::Option* baseline = cmd.add_option(
      "--baseline", external.baseline,
      "--external: a second worker command, the kernels the candidate would replace; the "
      "ratio candidate / baseline is reported per case");
  baseline->needs(external_option);
  cmd.add_option("--max-slowdown", external.max_slowdown,
                 "--baseline: exit 1 when a case's ratio exceeds this (e.g. 1.05)")
      ->needs(baseline);
  cmd.add_option("--external-timeout", external.timeout_seconds,
                  "--external: seconds a worker may take to start and for each case (default "
                  "300)")
      ->needs(external_option);
  cmd.add_option("--out", external.out,
                  "--external: directory for the case files and the workers' logs (default "
                  "mc-out/bench-external)")
      ->needs(external_option);
  return external_option;
}

void add_bench_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<gpu::BenchOptions>();
  auto engine = std::make_shared<EngineArgs>();
  auto engine_mode = std::make_shared<bool>(false);
  auto cases = std::make_shared<CaseArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time the CUDA kernels against cudaMemcpyAsync, or (--engine) the oracle engine");
  cmd->add_option("--preset", options->presets,
                  "Presets to time (default: mamba2-2.7b qwen3-next-80b nemotron-h-8b; "
                  "--engine: tiny-mamba2 nemotron-h-8b)");
  cmd->add_option("--requests", options->requests,
                  "Batch sizes (default: 64 256); --engine: requests in the workload");
  CLI::Option* iters =
      cmd->add_option("--iters", options->iters, "Timed runs per measurement (median reported)");
  CLI::Option* sets = cmd->add_option(
      "--sets", options->sets,
      "Input sets (disjoint blocks) rotated between timed runs at most, 1..3 (default 3; fewer "
      "where one launch alone touches 4x the L2)");
  CLI::Option* ticket = cmd->add_flag(
      "--ticket-start", options->ticket_start,
      "Start the fused kernel's CTAs by atomic tickets instead of a cooperative launch");
  cmd->add_option("--json", options->json_path, "Write the results as JSON to FILE");
  CLI::Option* flag = cmd->add_flag("--engine", *engine_mode,
                                    "Time the oracle engine alone (scheduler, runner, synthetic "
                                    "forward, every invariant after every step) on one core; "
                                    "needs no GPU");
  for (CLI::Option* timing : {iters, sets, ticket})
    timing->excludes(flag);
  add_engine_bench_options(*cmd, *engine, flag);
  CLI::Option* cases_option = cmd->add_option(
      "--cases", cases->cases,
      "Time N kernel campaign cases phase by phase (drawing, arenas, oracle, backend, compare, "
      "verdict, IPC) in this process; needs no GPU");
  cases_option->excludes(flag)->excludes(iters)->excludes(sets)->excludes(ticket);
  cmd->add_option("--max-size", cases->max_size, "--cases: largest generator size (default 30)")
      ->needs(cases_option);
  cmd->add_option("--backend", cases->backend, "--cases: host or cuda (default host)")
      ->needs(cases_option);
  CLI::Option* seed = cmd->add_option(
      "--seed", engine->options.seed,
      "--engine: seed of workload and scheduler; --cases: campaign seed (default 1)");
  auto external = std::make_shared<ExternalArgs>();
  CLI::Option* external_option =
      add_external_bench_options(*cmd, *external, {flag, cases_option, ticket});
  cmd->callback([options, engine, engine_mode, cases, cases_option, seed, external, external_option,
                 &action] {
    if (seed->count() > 0 && !*engine_mode && cases_option->count() == 0)
      throw CLI::ValidationError("--seed", "needs --engine or --cases");
    if (external_option->count() > 0)
      action = [options, external] { return run_external_bench_command(*options, *external); };
    else if (cases_option->count() > 0)
      action = [options, engine, cases] {
        return run_case_bench_command(*options, *cases, engine->options.seed);
      };
    else if (*engine_mode)
      action = [options, engine] { return run_engine_bench_command(*options, *engine); };
    else
      action = [options] { return run_bench_command(*options); };
  });
}

MC_REGISTER_COMMAND(add_bench_command);

} // namespace mc::cli
