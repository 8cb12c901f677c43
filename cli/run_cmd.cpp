// `mambacheck run`: an engine-level simulation. The oracle engine's scheduler produces each
// step; the oracle runner (with every invariant) and the GPU-side engine runner (host or
// cuda executor) execute it; after every step their launches, arrays and arena bytes are
// compared. Exit 0 when everything held, 1 on a mismatch or a broken invariant (the finding
// is printed), 2 on bad options, 3 when cuda is asked for and unavailable. --record writes the
// run's steps as a trace (`mambacheck replay` runs it again); --workload takes the requests from
// a request-level JSON Lines workload (scenarios/workload_import.h).
#include "backends/block_manager_worker.h"
#include "backends/external_engine.h"
#include "cli/commands.h"
#include "cli/compare_option.h"
#include "cli/coverage_option.h"
#include "cli/external_option.h"
#include "cli/output_paths.h"
#include "cli/parallel_option.h"
#include "cli/steps_out.h"
#include "harness/simulate.h"
#include "model/conv_history.h"
#include "model/errors.h"
#include "model/interrupt.h"
#include "model/parallel.h"
#include "model/presets.h"
#include "scenarios/workload_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

namespace mc::cli {
namespace {

struct RunOptions {
  std::string preset = "tiny-mamba2";
  std::int64_t steps = 1000;
  std::int32_t requests = 64;
  std::uint64_t seed = 1;
  std::string backend = "host";
  std::string runner = "v1";
  std::string mode = "align";
  std::int64_t pool_blocks = 0; // 0: the preset's
  std::int32_t num_spec = -1;   // -1: the preset's (all mode: 0)
  std::int32_t block_size = 0;
  std::int32_t layers = 0;        // 0: the preset's; else at most this many layers per group
  std::int32_t token_budget = 0; // 0: token_budget_default of the config
  std::int32_t resets_per_million = 0;
  std::int32_t aborts_per_million = 0;
  bool async = false;
  bool async_frees = false; // the flag's old name: refused, naming --async
  std::string v1_copy;   // empty: not given (precopy)
  std::string v2_tables; // empty: not given (batch_row)
  bool deferred_postprocess = false;
  std::string record;    // write the run as a trace (scenarios/FORMAT.md)
  std::string workload;  // requests from a JSON Lines workload (workload_import.h)
  std::string steps_out; // one JSON line per step (harness/step_view.h)
  double step_ms = 100.0;
  std::int32_t hash_block_tokens = 16;
  bool reference = false; // the oracle's plain structures (oracle/engine/structures.h)
  std::optional<std::int64_t> whole_compare_every; // harness/arena_compare.h
  std::vector<std::string> require_coverage;       // cli/coverage_option.h
  std::string external; // a worker command running the launches (backends/external_engine.h)
  double external_timeout = 300.0;
  std::string block_manager; // a worker command serving the KV cache manager
  double block_manager_timeout = backends::kBlockManagerTimeoutSecondsDefault;
  bool eagle = false; // EAGLE/MTP drafting: lookahead, the hit's dropped block, the split
  bool pad_tails = false; // a prompt's last token alone goes with placeholder drafts
  std::int32_t hash_block_size = 0; // partial-hash hits below the block size (0: none)
  std::string backend_name() const { return external.empty() ? backend : "external"; }
};

// Prompts and outputs long enough that requests cross block boundaries, prefill in several
// chunks and hit each other's cached blocks at the run's block size; at the tiny presets'
// sizes the default lengths already do.
void scale_workload(std::int32_t block_size, oracle::engine::WorkloadOptions& w) {
  w.prompt_len_max = std::max(w.prompt_len_max, 4 * block_size);
  w.output_len_max = std::max(w.output_len_max, 2 * block_size);
}

// --num-spec, --layers, --block-size and --token-budget over the preset's.
void apply_sizes(const RunOptions& o, harness::SimulationOptions& c) {
  if (o.num_spec >= 0) {
    check_option_within("--num-spec", o.num_spec, 0, model::kSpecTokensMax);
    c.config.num_spec_tokens = o.num_spec;
    c.config.num_spec_blocks = o.num_spec;             // one spec block per draft, in both modes
  } else if (c.config.mode == model::CacheMode::all) { // all mode drafts only when asked
    c.config.num_spec_tokens = 0;
    c.config.num_spec_blocks = 0;
  }
  model::cap_layers(c.spec, o.layers);
  if (o.block_size != 0) {
    check_option_within("--block-size", o.block_size, 1, model::kBlockSizeMax);
    c.config.mamba_block_size = o.block_size;
  }
  if (o.num_spec < 0 &&
      model::first_conv_without_drafts(model::build_layout(c.config, c.spec)) >= 0) {
    // The preset's drafts do not fit its conv windows (model/conv_history.h): run without.
    c.config.num_spec_tokens = 0;
    c.config.num_spec_blocks = 0;
  }
  scale_workload(c.config.mamba_block_size, c.engine.workload);
  if (o.token_budget != 0)
    check_option_within("--token-budget", o.token_budget, 1, oracle::engine::kTokenBudgetMax);
  c.engine.scheduler.token_budget =
      o.token_budget != 0 ? o.token_budget : oracle::engine::token_budget_default(c.config);
}

// Resets, aborts, async scheduling and the pool's size.
void apply_scheduler(const RunOptions& o, harness::SimulationOptions& c) {
  check_option_within("--resets-per-million", o.resets_per_million, 0, 1'000'000);
  check_option_within("--aborts-per-million", o.aborts_per_million, 0, 1'000'000);
  c.engine.scheduler.reset_prefix_cache_per_million = o.resets_per_million;
  c.engine.scheduler.abort_per_million = o.aborts_per_million;
  if (o.async_frees)
    model::fail_input("--async-frees is gone: --async runs async scheduling (one step in flight, "
                      "planned from optimistic counts; a freed block is held back only while the "
                      "step in flight can touch it)");
  c.engine.scheduler.async_scheduling = o.async;
  c.engine.scheduler.drafter_prunes_last_block = o.eagle;
  c.engine.scheduler.pad_prompt_tails = o.pad_tails;
  c.engine.scheduler.hash_block_size = o.hash_block_size;
  if (o.pool_blocks != 0) {
    check_option_within("--pool-blocks", o.pool_blocks, 4, model::kBlocksMax);
    c.spec.num_blocks = o.pool_blocks;
  }
}

// The V1 copy path and V2's table rows, each only for its runner.
void apply_runner(const RunOptions& o, harness::SimulationOptions& c) {
  const std::optional<model::V1CopyPath> v1_copy =
      o.v1_copy.empty() ? model::V1CopyPath::precopy : model::parse_v1_copy_path(o.v1_copy);
  if (!v1_copy)
    model::fail_input("--v1-copy: expected {}, got '{}'", model::kV1CopyPathNames, o.v1_copy);
  if (!o.v1_copy.empty() && c.engine.runner.flavour != model::RunnerFlavour::v1)
    model::fail_input("--v1-copy: only the v1 runner has pre-step copies (--runner {})", o.runner);
  c.engine.runner.v1_copy_path = *v1_copy;
  const std::optional<model::V2TableRows> v2_tables =
      o.v2_tables.empty() ? model::V2TableRows::batch_row : model::parse_v2_table_rows(o.v2_tables);
  if (!v2_tables)
    model::fail_input("--v2-tables: expected {}, got '{}'", model::kV2TableRowsNames, o.v2_tables);
  if ((!o.v2_tables.empty() || o.deferred_postprocess) &&
      c.engine.runner.flavour != model::RunnerFlavour::v2)
    model::fail_input("--v2-tables and --deferred-postprocess: only the v2 runner has them "
                      "(--runner {})",
                      o.runner);
  c.engine.runner.v2_table_rows = *v2_tables;
  c.engine.runner.deferred_postprocess = o.deferred_postprocess;
}

harness::SimulationOptions simulation_options(const RunOptions& o) {
  const model::Preset& preset = model::find_preset(o.preset);
  harness::SimulationOptions c{.config = preset.config, .spec = preset.spec, .preset = o.preset};
  c.config.mode = model::parse_cache_mode(o.mode);
  if (c.config.mode == model::CacheMode::none) model::fail_input("--mode: expected align or all");
  c.engine.runner.flavour = model::parse_runner(o.runner);
  apply_sizes(o, c);
  apply_scheduler(o, c);
  apply_runner(o, c);
  if (o.reference) c.engine.structures = oracle::engine::Structures::reference;
  c.arena_compare = arena_compare_policy(o.whole_compare_every);
  c.num_steps = o.steps;
  c.num_requests = o.requests;
  c.seed = o.seed;
  c.executor = engine_executor(o.backend);
  return c;
}

void print_summary(const RunOptions& o, const harness::SimulationResult& r, double seconds) {
  const oracle::engine::EngineReport& e = r.report;
  fmt::print("run: preset {}, runner {}, mode {}, backend {}, seed {}{}\n", o.preset, o.runner,
             o.mode, o.backend_name(), o.seed, o.reference ? ", reference structures" : "");
  fmt::print("steps {} (compared {}), requests {} (finished {}, aborted {}), {:.1f} s, {:.1f} "
             "steps/s\n",
             e.steps, r.steps_compared, e.requests, e.finished, e.aborts, seconds,
             seconds > 0 ? static_cast<double>(e.steps) / seconds : 0.0);
  fmt::print("preemptions {} (forced {}), resets {}, prefix hits {}\n", e.preemptions,
             e.forced_preemptions, e.resets, e.prefix_hits);
  std::string copies;
  for (const auto& [kind, n] : e.copies_by_kind)
    copies += fmt::format(" {} {}", kind, n);
  fmt::print("launches {}, copies by kind:{}\n", e.launches, copies.empty() ? " none" : copies);
  fmt::print("bytes compared {} ({}), bytes checked by invariants {}\n", r.bytes_compared,
             r.arenas.text(), e.bytes_checked);
}

int run_run(const RunOptions& o) {
  constexpr model::CoverageLevel kLevels[] = {model::CoverageLevel::engine};
  const model::CoverageRequirement required = coverage_requirement(o.require_coverage, kLevels);
  if (!o.external.empty() && o.backend != "host")
    model::fail_input("--external and --backend: give one of them");
  harness::SimulationOptions s = simulation_options(o);
  // Before any output file is opened: a bad workload leaves none behind.
  if (!o.workload.empty())
    s.requests = scenarios::import_workload_file(
        o.workload, {.step_ms = o.step_ms, .hash_block_tokens = o.hash_block_tokens});
  check_output_file("--record", o.record);
  std::unique_ptr<backends::ExternalEngineSource> external;
  if (!o.external.empty()) {
    check_timeout_option("--external-timeout", o.external_timeout);
    external = backends::start_external_engine(o.external, o.external_timeout, {});
    s.external = external.get();
  }
  const std::unique_ptr<backends::BlockManagerWorker> manager =
      start_block_manager(o.block_manager, o.block_manager_timeout);
  s.block_manager = manager.get();
  StepsOutput steps_output(o.steps_out, std::nullopt);
  s.on_view = steps_output.sink();
  if (!o.record.empty()) s.record = o.record;
  // One simulation at a time: a large step spreads over the cores this process may use.
  model::set_work_threads(usable_cores());
  const auto start = std::chrono::steady_clock::now();
  const harness::SimulationResult r = harness::simulate(s);
  print_summary(o, r,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::fflush(stdout);
  const std::vector<std::string> missing = report_coverage(required, r.coverage);
  steps_output.finish();
  if (r.finding) {
    fmt::print("FINDING: {}\n", r.finding->message);
    return kExitMismatch;
  }
  if (r.mismatch) {
    fmt::print("MISMATCH oracle vs {}: {}\n", o.backend_name(), r.mismatch->text);
    return kExitMismatch;
  }
  if (r.interrupted) {
    fmt::print("run: interrupted by {} after {} steps (they held)\n",
               model::signal_name(model::interrupt_signal()), r.report.steps);
    return 128 + model::interrupt_signal();
  }
  fmt::print("held: oracle and {} agree on every step\n", o.backend_name());
  return missing.empty() ? kExitOk : kExitMismatch;
}

// The engine's shape: runner, mode, pool, drafts, sizes, scheduling.
void add_engine_options(CLI::App& cmd, RunOptions& o) {
  cmd.add_option("--runner", o.runner, "v1 or v2 (default v1)");
  cmd.add_option("--mode", o.mode, "align or all (default align)");
  cmd.add_option("--pool-blocks", o.pool_blocks, "Blocks per state tensor (default: preset's)");
  cmd.add_option("--v1-copy", o.v1_copy,
                  "V1 pre-step copies: precopy, precopy_v1 (vLLM's fused path today) or "
                  "batch_copy (default precopy)");
  cmd.add_option("--v2-tables", o.v2_tables,
                  "V2 copy kernels find a request's block-table row by batch_row (the seed, "
                  "default) or by slot (#55506)");
  cmd.add_flag("--deferred-postprocess", o.deferred_postprocess,
                "V2: each step's postprocess runs deferred, after another batch order was "
                "gathered (pipeline parallelism; with --v2-tables batch_row it copies through "
                "another request's row, #55951)");
  cmd.add_option("--num-spec", o.num_spec,
                  "Speculative tokens per decode, 0..16 (default: the preset's; 0 in all mode and "
                  "where the preset's conv windows hold no drafts)");
  cmd.add_option("--block-size", o.block_size,
                  "Mamba block size B, tokens per state block (default: the preset's)");
  cmd.add_option("--layers", o.layers,
                  "At most this many layers per group (default: the preset's; production "
                  "presets at full depth hold gigabytes of state per block)");
  cmd.add_option("--token-budget", o.token_budget,
                  "Tokens per step (default: 32, or B and 1 + drafts where that is more)");
  cmd.add_option("--resets-per-million", o.resets_per_million,
                  "Chance per step of reset_prefix_cache, which force-preempts every running "
                  "request (default 0)");
  cmd.add_option("--aborts-per-million", o.aborts_per_million,
                  "Chance per step that one running or waiting request is aborted (default 0)");
  cmd.add_flag("--async", o.async,
                "Async scheduling as vLLM's: each step planned while the one before it runs, "
                "from counts that take its drafts as accepted; a block freed meanwhile that the "
                "step in flight can touch is held back until it completes");
  cmd.add_flag("--async-frees", o.async_frees, "Replaced by --async")->group("");
  cmd.add_flag("--eagle", o.eagle,
                "EAGLE/MTP drafting as vLLM schedules it: prefill chunks stop a block before the "
                "last boundary, and a block manager gets the drafts as lookahead and drops the "
                "last block of an attention hit");
  cmd.add_flag("--pad-tails", o.pad_tails,
               "vLLM's pad_spec_decode: a prompt's last token scheduled alone goes with "
               "num_spec placeholder drafts, all rejected, so the batch keeps its 1 + num_spec "
               "graph shape (#55178)");
  cmd.add_option("--hash-block-size", o.hash_block_size,
                 "vLLM's hash_block_size: prefix hashes every N tokens, N a divisor of the Mamba "
                 "block size; below it (align mode) hits end mid-block and are copied on write, "
                 "and a prompt's last partial block is cached (default: the block size)");
}

// What the run writes, where its requests come from, how it compares.
void add_output_options(CLI::App& cmd, RunOptions& o) {
  cmd.add_option("--record", o.record, "Write the run's steps as a trace (replay it later)");
  cmd.add_option("--steps-out", o.steps_out,
                  "Write what the oracle believes happened, one JSON line per step");
  CLI::Option* workload = cmd.add_option("--workload", o.workload,
                  "Requests from a JSON Lines workload (timestamp ms, input_length, "
                  "output_length, hash_ids) instead of generated ones");
  cmd.add_option("--step-ms", o.step_ms, "--workload: milliseconds per step (default 100)")
      ->needs(workload);
  cmd.add_option("--hash-block-tokens", o.hash_block_tokens,
                  "--workload: tokens per hash id (default 16)")
      ->needs(workload);
  add_whole_compare_option(cmd, o.whole_compare_every);
  cmd.add_flag("--reference", o.reference,
               "Run the oracle on its plain structures and the bytes of every state instead of "
               "its fast ones and what each block means: the same steps, counters and trace, "
               "slower (oracle/engine/structures.h, state_store.h)");
  add_require_coverage_option(cmd, o.require_coverage);
}

void add_run_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Engine simulation: oracle vs a backend, every step");
  cmd->add_option("--preset", o->preset, "Layout preset (see `mambacheck layout`)");
  cmd->add_option("--steps", o->steps, "Scheduler steps at most (default 1000)");
  cmd->add_option("--requests", o->requests, "Requests in the workload (default 64)");
  cmd->add_option("--seed", o->seed, "Seed of workload and scheduler (default 1)");
  cmd->add_option("--backend", o->backend, "host or cuda (default host)");
  add_external_options(*cmd, o->external, o->external_timeout);
  add_block_manager_options(*cmd, o->block_manager, o->block_manager_timeout);
  add_engine_options(*cmd, *o);
  add_output_options(*cmd, *o);
  cmd->callback([o, &action] { action = [o] { return run_run(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_run_command);

} // namespace mc::cli
