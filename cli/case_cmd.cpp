// `mambacheck case DIR`: runs one saved launch case (model/CASE_FORMAT.md) on a backend,
// writes the result (--out), compares it with the expected result stored in DIR (--check).
//
// Every backend run is preceded by the oracle's run: it is the judge of what is valid
// (a column outside its row, a block outside its arena: exit 2) before a kernel sees the
// case, and its result is what --check compares against when DIR holds no expected result.
#include "backends/backend.h"
#include "backends/external_backend.h"
#include "backends/mutant_backend.h"
#include "cli/case_print.h"
#include "cli/commands.h"
#include "cli/external_option.h"
#include "cli/output_paths.h"
#include "fuzz/compare.h"
#include "fuzz/findings.h"
#include "fuzz/isolate.h"
#include "fuzz/run_case.h"
#include "model/case_file.h"
#include "model/launch_kinds.h"
#include "oracle/launch.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

namespace mc::cli {
namespace {

struct CaseOptions {
  std::string dir;
  std::string backend = "oracle";
  std::string out;
  std::string report;
  bool check = false;
  bool print = false;   // the oracle's decisions per row and its arrays, as text
  bool json = false;    // the same as JSON on standard output, and nothing else
  std::string external; // a worker command running the kernels under test
  double external_timeout = backends::kExternalTimeoutSecondsDefault;
  int reruns = 0; // with --check: run the backend this many more times and report the rate
  std::string mutant; // host or cuda: run a kernel mutant instead of the clean kernels
};

std::string summary(const model::LaunchResult& result) {
  if (result.status == model::LaunchStatus::unsupported)
    return fmt::format("unsupported: {}", result.unsupported_reason);
  std::int64_t bytes = 0;
  for (const model::CopyDecision& d : result.decisions)
    bytes += d.bytes;
  return fmt::format("ok: {} copies, {} bytes", result.decisions.size(), bytes);
}

// The backend under test as run_case takes it; empty for the oracle, whose result run_case
// then clones instead of running it twice.
fuzz::LaunchRunner case_runner(const CaseOptions& options, backends::Backend backend) {
  if (!options.external.empty()) // a worker that cannot be used is exit 3 (main)
    return [&options](const model::LaunchCase& c) {
      return backends::run_external_once(options.external, options.external_timeout, c);
    };
  if (backend == backends::Backend::oracle) return {};
  const fuzz::LaunchRunner run = backends::kernel_runner(
      backend, backends::parse_kernel_mutant(options.mutant.empty() ? "none" : options.mutant));
  if (backend != backends::Backend::host) return run;
  // The host kernels run in this process, where one that faults would end it: a forked child
  // runs them first, and a crash there is the backend failing on the case (a mismatch).
  return [run](const model::LaunchCase& c) {
    const fuzz::IsolatedOutcome probe = fuzz::run_isolated([&] {
      run(c);
      return std::string();
    });
    if (!probe.returned())
      throw fuzz::KernelError(fmt::format("the backend crashed: {}", probe.message));
    return run(c);
  };
}

// The external kernels failed on the case (an `error:` answer): a mismatch.
int report_kernel_error(const CaseOptions& options, const model::LaunchCase& launch_case,
                        const std::string& backend_name, const std::string& error) {
  std::cout << fmt::format("{}: {} on {} ({} rows): MISMATCH: the backend failed: {}\n",
                           options.dir, model::to_string(launch_case.kind), backend_name,
                           launch_case.num_reqs, error);
  write_json_file("--report", options.report,
                  {{"case", options.dir},
                   {"kind", model::to_string(launch_case.kind)},
                   {"backend", backend_name},
                   {"external", options.external},
                   {"difference", error},
                   {"exit_code", kExitMismatch}});
  return kExitMismatch;
}

// The first run's verdict and `reruns` more runs of the backend, each compared with the
// stored result or the oracle's.
fuzz::RunTally rerun(const CaseOptions& options, const model::LaunchCase& launch_case,
                     backends::Backend backend, const std::optional<model::LaunchResult>& expected,
                     const std::optional<std::string>& first, bool first_backend_error) {
  fuzz::RunTally tally;
  tally.add(first, first_backend_error);
  const model::LaunchResult oracle = expected ? model::LaunchResult{} : oracle::run_launch(launch_case);
  const fuzz::LaunchRunner runner = case_runner(options, backend);
  for (int i = 0; i < options.reruns; ++i) {
    const fuzz::CaseOutcome again = fuzz::run_case(launch_case, expected ? expected->clone()
                                                                         : oracle.clone(),
                                                   runner, fuzz::BackendFindings::kernel_errors);
    if (again.status == fuzz::CaseStatus::backend_failed) {
      tally.add(fmt::format("the backend failed: {}", again.error), true);
      continue;
    }
    tally.add(again.difference ? std::optional(again.difference->message) : std::nullopt, false);
  }
  return tally;
}

// The options, refused before the case is read; the backend they name.
backends::Backend checked_backend(const CaseOptions& options) {
  const bool external = !options.external.empty();
  const backends::Backend backend = backends::parse_backend(options.backend);
  if (external && backend != backends::Backend::oracle)
    model::fail_input("--external and --backend: give one of them");
  check_timeout_option("--external-timeout", options.external_timeout);
  check_option_range("--reruns", options.reruns, 0, 100000);
  if (options.reruns > 0 && !options.check) model::fail_input("--reruns: needs --check");
  check_output_file("--report", options.report);
  create_output_dir("--out", options.out);
  if (!options.mutant.empty()) {
    if (external || backend == backends::Backend::oracle)
      model::fail_input("--mutant: runs on --backend host or cuda");
    backends::parse_kernel_mutant(options.mutant); // an unknown name is exit 2 before any work
  }
  backends::require_backend(backend);
  return backend;
}

// The oracle's result: before any backend runs, the oracle judges the case (an invalid one is
// exit 2, naming the .npy file that holds the bad value).
model::LaunchResult oracle_result_of(const CaseOptions& options, const model::LaunchCase& launch) {
  try {
    return oracle::run_launch(launch);
  } catch (const model::LaunchInputError& e) {
    model::fail_in_case(options.dir, e);
  } catch (const model::InputError& e) {
    model::fail_input("{}: {}", options.dir, e.what());
  }
}

// --check: the backend's result against the stored one (or the oracle's), and --reruns; the
// exit code, what it found written into `report`.
int check_result(const CaseOptions& options, const model::LaunchCase& launch_case,
                 backends::Backend backend, const fuzz::CaseOutcome& outcome,
                 nlohmann::json& report) {
  const model::LaunchResult& result = outcome.backend;
  int exit_code = kExitOk;
  // run_case compared with the oracle; a result stored with the case takes its place.
  const bool stored = model::has_result(options.dir);
  const std::optional<model::LaunchResult> expected =
      stored ? std::optional(model::load_result(options.dir)) : std::nullopt;
  const std::optional<fuzz::Difference> difference =
      stored ? fuzz::compare_results(launch_case, *expected, result) : outcome.difference;
  report["expected_from"] = stored ? "stored" : "oracle";
  if (difference) {
    std::cout << fmt::format("MISMATCH against the {} result: {}\n", stored ? "stored" : "oracle",
                             difference->message);
    report["difference"] = fuzz::to_json(*difference);
    exit_code = kExitMismatch;
  } else {
    std::cout << fmt::format("matches the {} result exactly\n", stored ? "stored" : "oracle");
  }
  if (options.reruns > 0) {
    const fuzz::RunTally tally =
        rerun(options, launch_case, backend, expected,
              difference ? std::optional(difference->message) : std::nullopt, false);
    std::cout << fmt::format("{}{}\n", tally.summary(),
                             tally.failed > 0 ? fmt::format(" ({})", to_string(tally.classify()))
                                              : "");
    const bool detail =
        tally.failed > 0 && tally.classify() != fuzz::Classification::deterministic;
    for (std::size_t i = 0; detail && i < tally.run_failures.size(); ++i)
      std::cout << fmt::format("  run {}: {}\n", i + 1,
                               tally.run_failures[i].empty() ? "held" : tally.run_failures[i]);
    report["runs"] = tally.runs;
    report["failed_runs"] = tally.failed;
    if (tally.failed > 0) {
      report["classification"] = to_string(tally.classify());
      exit_code = kExitMismatch;
    }
  }
  return exit_code;
}

int run_case_command(const CaseOptions& options) {
  const backends::Backend backend = checked_backend(options);
  const bool external = !options.external.empty();
  const std::string backend_name =
      external                  ? "external"
      : options.mutant.empty() ? options.backend
                               : fmt::format("{} (mutant {})", options.backend, options.mutant);
  const model::LaunchCase launch_case = model::load_case(options.dir);
  model::LaunchResult oracle_result = oracle_result_of(options, launch_case);
  if (options.json) {
    std::cout << case_decisions_json(launch_case, oracle_result).dump(2) << "\n";
    return kExitOk;
  }
  if (options.print) std::cout << case_decisions_text(launch_case, oracle_result);
  const fuzz::CaseOutcome outcome =
      fuzz::run_case(launch_case, std::move(oracle_result), case_runner(options, backend),
                     fuzz::BackendFindings::kernel_errors);
  if (outcome.status == fuzz::CaseStatus::backend_failed) {
    const int code = report_kernel_error(options, launch_case, backend_name, outcome.error);
    if (options.reruns > 0) {
      const fuzz::RunTally tally = rerun(
          options, launch_case, backend,
          model::has_result(options.dir) ? std::optional(model::load_result(options.dir))
                                         : std::nullopt,
          fmt::format("the backend failed: {}", outcome.error), true);
      std::cout << fmt::format("{} ({})\n", tally.summary(), to_string(tally.classify()));
    }
    return code;
  }
  const model::LaunchResult& result = outcome.backend;
  std::cout << fmt::format("{}: {} on {} ({} rows): {}\n", options.dir,
                           model::to_string(launch_case.kind), backend_name, launch_case.num_reqs,
                           summary(result));
  nlohmann::json report = {{"case", options.dir},
                           {"kind", model::to_string(launch_case.kind)},
                           {"backend", backend_name},
                           {"result", summary(result)}};
  if (external) report["external"] = options.external;
  if (!options.out.empty()) {
    model::save_case(launch_case, options.out);
    model::save_result(result, options.out);
    std::cout << fmt::format("result written to {}/{}/\n", options.out, model::kResultDirName);
  }
  const int exit_code =
      options.check ? check_result(options, launch_case, backend, outcome, report) : kExitOk;
  report["exit_code"] = exit_code;
  write_json_file("--report", options.report, report);
  return exit_code;
}

void add_case_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<CaseOptions>();
  CLI::App* cmd = app.add_subcommand("case", "Run a saved launch case on a backend");
  cmd->add_option("dir", options->dir, "Case directory (case.json + .npy files)")->required();
  cmd->add_option("--backend", options->backend, "oracle, host or cuda (default oracle)");
  cmd->add_option("--out", options->out, "Write the case and this backend's result here");
  cmd->add_flag("--print", options->print,
                "Print the oracle's decision for every row and the arrays after the launch");
  cmd->add_flag("--json", options->json,
                "Print the oracle's decisions and arrays as JSON, and nothing else");
  cmd->add_flag("--check", options->check,
                "Compare with DIR/expected (or the oracle when DIR has none); exit 1 on a "
                "difference");
  cmd->add_option("--report", options->report, "Write a JSON report");
  cmd->add_option("--mutant", options->mutant,
                  "Run the kernels of this kernel mutant (mambacheck mutants --list)");
  cmd->add_option("--reruns", options->reruns,
                  "With --check: run the backend N more times and report how often it failed "
                  "(a race or an uninitialised read fails on some runs only)");
  cmd->add_option("--external", options->external,
                  "Run the case on the kernels under test through a worker command, e.g. "
                  "'python3 -m mambacheck_adapter.worker --kernels MODULE' "
                  "(adapters/python/README.md)");
  cmd->add_option("--external-timeout", options->external_timeout,
                  "Seconds the worker may take to start and to run the case (default 300)");
  cmd->callback([options, &action] { action = [options] { return run_case_command(*options); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_case_command);

} // namespace mc::cli
