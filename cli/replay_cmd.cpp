// `mambacheck replay TRACE.jsonl`: a recorded trace (scenarios/FORMAT.md) run step by step on
// the oracle (every invariant) and on a backend, compared after each step. Exit 0 held, 1 a
// finding or a difference (named by step, trace line, launch, request, tensor and bytes),
// 2 a malformed or impossible trace (FILE:LINE: field: reason), 3 cuda unavailable.
// `--library DIR` replays every scenario of a library instead (each clean, then with each of
// its mutants: a scenario passes when it holds clean and fails on every mutant it names).
#include "cli/replay_run.h"

#include "backends/external_engine.h"
#include "cli/commands.h"
#include "cli/compare_option.h"
#include "cli/coverage_option.h"
#include "cli/external_option.h"
#include "cli/junit.h"
#include "cli/mutant_option.h"
#include "cli/output_paths.h"
#include "cli/parallel_option.h"
#include "cli/progress.h"
#include "cli/steps_out.h"
#include "gpu/engine/runner_mutant.h"
#include "harness/library.h"
#include "harness/replay.h"
#include "model/errors.h"
#include "model/interrupt.h"
#include "model/parallel.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <memory>

namespace mc::cli {
namespace {

// --external: the worker, started once for the command (null without it).
std::unique_ptr<backends::ExternalEngineSource> external_source(const ReplayCliOptions& o) {
  if (o.external.empty()) return nullptr;
  if (o.kernel_mutant != "none" || o.runner_mutant != "none")
    model::fail_input("--mutant: not with --external (the worker runs its own kernels)");
  check_timeout_option("--external-timeout", o.external_timeout);
  return backends::start_external_engine(o.external, o.external_timeout, {});
}

harness::ReplayOptions replay_options(const ReplayCliOptions& o) {
  if (!o.external.empty() && o.backend != "host")
    model::fail_input("--external and --backend: give one of them");
  harness::ReplayOptions r;
  r.executor = engine_executor(o.backend);
  if (!o.runner.empty()) r.runner = model::parse_runner(o.runner);
  const std::optional<model::V1CopyPath> v1_copy = model::parse_v1_copy_path(o.v1_copy);
  if (!v1_copy)
    model::fail_input("--v1-copy: expected {}, got '{}'", model::kV1CopyPathNames, o.v1_copy);
  r.v1_copy_path = *v1_copy;
  const std::optional<model::V2TableRows> v2_tables = model::parse_v2_table_rows(o.v2_tables);
  if (!v2_tables)
    model::fail_input("--v2-tables: expected {}, got '{}'", model::kV2TableRowsNames, o.v2_tables);
  r.v2_table_rows = *v2_tables;
  r.deferred_postprocess = o.deferred_postprocess;
  r.unordered_writer = o.unordered_writer;
  const std::optional<gpu::Mutant> km = gpu::find_kernel_mutant(o.kernel_mutant);
  if (!km)
    model::fail_input("--kernel-mutant: unknown mutant '{}' (see `mambacheck mutants`)",
                      o.kernel_mutant);
  r.kernel_mutant = *km;
  const std::optional<gpu::engine::RunnerMutant> rm =
      gpu::engine::find_runner_mutant(o.runner_mutant);
  if (!rm)
    model::fail_input("--runner-mutant: unknown mutant '{}' (see `mambacheck mutants`)",
                      o.runner_mutant);
  r.runner_mutant = *rm;
  if (o.steps_max < -1) model::fail_input("--steps: expected -1 (all) or a count");
  r.steps_max = o.steps_max;
  model::check_layers_max(o.layers);
  r.layers_max = o.layers;
  r.arena_compare = arena_compare_policy(o.whole_compare_every);
  if (o.reference) r.structures = oracle::engine::Structures::reference;
  return r;
}

nlohmann::json finding_json(const oracle::engine::Finding& f) {
  return {{"kind", std::string(oracle::engine::to_string(f.kind))},
          {"step", f.step},
          {"request", f.req_id},
          {"tensor", f.tensor},
          {"group", f.group},
          {"layer", f.layer},
          {"state", f.state},
          {"col", f.col},
          {"block", f.block_id},
          {"detail", f.detail},
          {"expected", f.expected},
          {"message", f.message}};
}

nlohmann::json result_json(const ReplayCliOptions& o, const harness::ReplayResult& r) {
  const oracle::engine::ReplayStats& s = r.stats;
  nlohmann::json j = {{"trace", r.trace},
                      {"backend", o.backend},
                      {"runner", std::string(model::to_string(r.config.runner))},
                      {"mode", std::string(model::to_string(r.config.mode))},
                      {"preset", r.preset},
                      {"trace_layers", r.trace_layers},
                      {"layers_max", r.layers_max},
                      {"kernel_mutant", o.kernel_mutant},
                      {"runner_mutant", o.runner_mutant},
                      {"result", r.finding         ? "finding"
                                 : r.mismatch      ? "mismatch"
                                 : r.expectation() ? "expectation"
                                                   : "held"},
                      {"expectations_checked", r.expectations_checked},
                      {"steps", s.steps},
                      {"steps_compared", r.steps_compared},
                      {"request_steps", s.request_steps},
                      {"tokens", s.tokens},
                      {"arrivals", s.arrivals},
                      {"finished", s.finished},
                      {"preemptions", s.preemptions},
                      {"resumes", s.resumes},
                      {"resets", s.resets},
                      {"prefix_hits", s.prefix_hits},
                      {"launches", s.launches},
                      {"copies_by_kind", s.copies_by_kind},
                      {"bytes_compared", r.bytes_compared},
                      {"arenas_compared", r.arenas.text()},
                      {"bytes_checked", s.bytes_checked},
                      {"coverage", model::to_json(r.coverage)}};
  if (!r.held()) {
    j["stop_step"] = r.stop_step;
    j["stop_line"] = r.stop_line;
    j["summary"] = r.summary();
  }
  if (r.finding) j["finding"] = finding_json(*r.finding);
  if (r.expectation()) j["expectation"] = harness::to_json(*r.expectation());
  if (!r.expectations_failed.empty()) {
    nlohmann::json& failed = j["expectations_failed"] = nlohmann::json::array();
    for (const harness::ReplayResult::FailedExpectation& f : r.expectations_failed) {
      failed.push_back(nlohmann::json(harness::to_json(f.difference)));
      failed.back()["line"] = f.line;
    }
  }
  if (r.mismatch) {
    j["mismatch"] = harness::text_after_step(*r.mismatch);
    j["difference"] = harness::to_json(*r.mismatch);
  }
  return j;
}

constexpr model::CoverageLevel kEngineLevel[] = {model::CoverageLevel::engine};

// `o` with --mutant sorted into its kernel and runner mutant.
ReplayCliOptions with_mutants(ReplayCliOptions o) {
  const MutantNames mutants = mutants_by_level(
      o.mutants, {.kernel = o.kernel_mutant, .runner = o.runner_mutant});
  if (mutants.scheduler != "none")
    model::fail_input("--mutant: '{}' is a scheduler mutant: a trace's steps are what a scheduler "
                      "sent; run it with `fuzz --level engine --mutant {}`",
                      mutants.scheduler, mutants.scheduler);
  o.kernel_mutant = mutants.kernel;
  o.runner_mutant = mutants.runner;
  return o;
}

// What ran (and at what depth), its counters and speed, and the verdict line.
void print_summary(const ReplayCliOptions& o, const harness::ReplayResult& r, double seconds) {
  const oracle::engine::ReplayStats& s = r.stats;
  const std::string depth =
      r.layers_max > 0 && r.layers_max < r.trace_layers
          ? fmt::format(", at most {} of the trace's {} layers per group", r.layers_max,
                        r.trace_layers)
          : "";
  fmt::print("replay: {} (runner {}, mode {}, backend {}{})\n", o.trace,
             model::to_string(r.config.runner), model::to_string(r.config.mode),
             o.external.empty() ? o.backend : "external", depth);
  fmt::print("steps {} (compared {}), request-steps {}, arrivals {}, preemptions {}, resumes {}, "
             "resets {}, prefix hits {}, {:.0f} steps/s\n",
             s.steps, r.steps_compared, s.request_steps, s.arrivals, s.preemptions, s.resumes,
             s.resets, s.prefix_hits, seconds > 0 ? static_cast<double>(s.steps) / seconds : 0.0);
  fmt::print("bytes compared {} ({})\n", r.bytes_compared, r.arenas.text());
  fmt::print("{}\n", r.summary());
  // The summary names the first failed expectation unless a finding or difference came first;
  // every other follows, one line each.
  const std::size_t named = r.finding || r.mismatch ? 0 : 1;
  for (std::size_t i = named; i < r.expectations_failed.size(); ++i)
    fmt::print("{}\n", r.expectations_failed[i].text());
  if (r.expectations_failed.size() > 1)
    fmt::print("{} of {} expectations failed\n", r.expectations_failed.size(),
               r.expectations_checked);
}

} // namespace

int replay_one(const ReplayCliOptions& given) {
  const ReplayCliOptions o = with_mutants(given);
  const model::CoverageRequirement required =
      coverage_requirement(o.require_coverage, kEngineLevel);
  harness::ReplayOptions options = replay_options(o);
  check_output_file("--report", o.report);
  const std::unique_ptr<backends::ExternalEngineSource> external = external_source(o);
  options.external = external.get();
  check_output_file("--junit", o.junit);
  StepsOutput steps_output(o.steps_out,
                           o.explain == kNoStep ? std::nullopt : std::optional(o.explain));
  options.on_view = steps_output.sink();
  Progress progress("replay", -1);
  options.on_step = [&progress](std::int64_t) { progress.tick(); };
  // One simulation at a time: a large step spreads over the cores this process may use.
  model::set_work_threads(usable_cores());
  const auto start = std::chrono::steady_clock::now();
  const harness::ReplayResult r = harness::replay_file(o.trace, options);
  progress.done();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const oracle::engine::ReplayStats& s = r.stats;
  print_summary(o, r, seconds);
  const bool cut_short = r.held() && r.interrupted;
  const std::string interrupted =
      cut_short ? fmt::format("interrupted by {} after {} steps of the trace (they held)",
                              model::signal_name(model::interrupt_signal()), s.steps)
                : "";
  if (cut_short) fmt::print("replay: {}\n", interrupted);
  std::cout << std::flush;
  const std::vector<std::string> missing = report_coverage(required, r.coverage);
  steps_output.finish();
  if (!o.report.empty()) {
    nlohmann::json j = result_json(o, r);
    if (cut_short) {
      j["result"] = "interrupted";
      j["interrupted"] = interrupted;
    }
    if (!required.empty()) j["coverage_missing"] = missing;
    write_json_file("--report", o.report, j);
  }
  if (!o.junit.empty())
    write_junit(o.junit, "mambacheck.replay",
                {JunitCase{.name = o.trace,
                           .seconds = seconds,
                           .failed = !r.held(),
                           .skipped = cut_short,
                           .message = cut_short ? interrupted : r.held() ? "" : r.summary()}});
  // A trace cut short has not had the chance to reach what it was required to.
  if (cut_short) return 128 + model::interrupt_signal();
  return r.held() && missing.empty() ? kExitOk : kExitMismatch;
}

namespace {

int replay_library(const ReplayCliOptions& o) {
  const model::CoverageRequirement required =
      coverage_requirement(o.require_coverage, kEngineLevel);
  harness::ReplayOptions options = replay_options(o);
  const std::unique_ptr<backends::ExternalEngineSource> external = external_source(o);
  options.external = external.get();
  const std::vector<harness::LibraryResult> results = harness::run_library(o.library, options);
  std::vector<JunitCase> cases;
  nlohmann::json report = nlohmann::json::array();
  bool all = true;
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  for (const harness::LibraryResult& r : results) {
    all = all && r.passed();
    coverage.merge(r.clean.coverage);
    std::string mutants;
    for (const auto& m : r.mutants)
      mutants += fmt::format(" {}={}", m.mutant, m.caught ? "caught" : "MISSED");
    if (!r.skipped.empty())
      fmt::print("skip {} [{}]: {}\n", r.info.name, r.info.bug_class, r.skipped);
    else
      fmt::print("{} {} [{}]: clean {}{}\n", r.passed() ? "pass" : "FAIL", r.info.name,
                 r.info.bug_class, r.clean.held() ? "held" : r.clean.summary(), mutants);
    cases.push_back({.name = r.info.name,
                     .failed = !r.passed(),
                     .skipped = !r.skipped.empty(),
                     .message = !r.skipped.empty() ? r.skipped
                                : r.passed()       ? ""
                                                   : r.clean.summary() + mutants});
    report.push_back({{"name", r.info.name},
                      {"bug_class", std::string(1, r.info.bug_class)},
                      {"passed", r.passed()},
                      {"clean", r.clean.summary()},
                      {"mutants", mutants}});
  }
  write_json_file("--report", o.report, report);
  if (!o.junit.empty()) write_junit(o.junit, "mambacheck.library", cases);
  fmt::print("{} of {} scenarios passed\n",
             std::count_if(results.begin(), results.end(),
                           [](const harness::LibraryResult& r) { return r.passed(); }),
             results.size());
  std::cout << "the scenarios replayed clean, together:\n" << std::flush;
  const std::vector<std::string> missing = report_coverage(required, coverage);
  return all && missing.empty() ? kExitOk : kExitMismatch;
}

void add_replay_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ReplayCliOptions>();
  CLI::App* cmd =
      app.add_subcommand("replay", "Replay a recorded trace on the oracle and a backend");
  cmd->add_option("trace", o->trace, "The trace (JSON Lines, scenarios/FORMAT.md)");
  cmd->add_option("--library", o->library,
                  "Replay every scenario of this directory, clean and with its mutants");
  cmd->add_option("--backend", o->backend, "host or cuda (default host)");
  add_external_options(*cmd, o->external, o->external_timeout);
  cmd->add_option("--runner", o->runner, "v1 or v2 (default: the trace's)");
  cmd->add_option("--v1-copy", o->v1_copy,
                  "V1 pre-step copies: precopy, precopy_v1 (vLLM's fused path today) or "
                  "batch_copy");
  cmd->add_option("--v2-tables", o->v2_tables,
                  "V2 copy kernels find a request's block-table row by batch_row (the seed) or "
                  "by slot (#55506)");
  cmd->add_flag("--deferred-postprocess", o->deferred_postprocess,
                "V2: each step's postprocess runs deferred, after another batch order was "
                "gathered (pipeline parallelism)");
  cmd->add_flag("--unordered-writer", o->unordered_writer,
                "The engine had a writer not ordered with its steps (a KV connector's loads): "
                "no block the step in flight can touch may be handed out or hit (default: the "
                "trace header's scheduler.unordered_writer)");
  cmd->add_option("--report", o->report, "Write a JSON report");
  cmd->add_option("--junit", o->junit, "Write JUnit XML");
  add_mutant_option(*cmd, o->mutants, o->kernel_mutant, o->runner_mutant,
                    "Run the backend's kernels or runner as this mutant (repeatable: one of each)");
  cmd->add_option("--steps", o->steps_max, "Replay at most this many steps (default: all)");
  cmd->add_option("--layers", o->layers,
                  "At most this many layers per group (default: the trace's; a trace recorded "
                  "at a production model's depth holds gigabytes of state per block)");
  cmd->add_option("--steps-out", o->steps_out,
                  "Write what the oracle believes happened, one JSON line per step: per row the "
                  "counts, state columns, num_accepted, pre- and post-step copies, block tables; "
                  "blocks freed and cached");
  cmd->add_option("--explain", o->explain, "Print that step (its index) as a table");
  add_whole_compare_option(*cmd, o->whole_compare_every);
  cmd->add_flag("--reference", o->reference,
                "Run the oracle on its plain structures and the bytes of every state instead of "
                "what each block means: the same steps, verdicts and texts, slower");
  add_require_coverage_option(*cmd, o->require_coverage);
  cmd->callback([o, &action] {
    action = [o] {
      if (o->trace.empty() == o->library.empty())
        model::fail_input("replay: give a trace or --library DIR (one of the two)");
      return o->library.empty() ? replay_one(*o) : replay_library(*o);
    };
  });
}

} // namespace

MC_REGISTER_COMMAND(add_replay_command);

} // namespace mc::cli
