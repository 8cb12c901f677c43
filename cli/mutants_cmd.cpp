// `mambacheck mutants`: the fuzzer against every mutant of the catalogue (gpu/mutant.h; or
// --only a few), each with its own time budget; prints the table (mutant, bug class, killed,
// time to kill, cases, shrunk counterexample size) and exits 1 if any mutant survives (but a
// racy one on cuda, where surviving is a matter of scheduling: gpu/mutant.h, MutantSchedule).
// Counterexamples go under --out/NAME/ (default mc-out/mutants/NAME/). `--list` prints the
// catalogue's entries instead of running them.
#include "backends/backend.h"
#include "backends/external_backend.h"
#include "backends/mutant_backend.h"
#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/junit.h"
#include "cli/mutants_levels.h"
#include "cli/output_paths.h"
#include "cli/progress.h"
#include "fuzz/mutants/mutants.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace mc::cli {
namespace {

// cuda: a kernel mutant that reads or writes out of bounds faults the device, and a fault loses
// the CUDA context of the process that ran it for good; the engine-level mutants after it run
// in this process. So every kernel-mutant launch runs in a device worker process (`mambacheck
// worker --backend cuda --mutant NAME`, one per mutant), which the external backend restarts
// after a fault: the fault is that case's finding, and this process's context stays whole.
fuzz::MutantLaunchRunner device_worker_runner(const std::string& out) {
  using Workers = std::map<gpu::Mutant, std::shared_ptr<backends::ExternalWorker>>;
  return [workers = std::make_shared<Workers>(), out](const model::LaunchCase& launch,
                                                       gpu::Mutant mutant) {
    std::shared_ptr<backends::ExternalWorker>& worker = (*workers)[mutant];
    if (!worker) {
      const std::string name(gpu::kernel_mutants()[static_cast<std::size_t>(mutant) - 1].name);
      // A worker that cannot start says nothing of the mutant: it must end the run (exit 3),
      // never count as the case's finding, which any std::exception from here would.
      try {
        worker = backends::start_worker_in(
            fmt::format(
                "exec {} worker --backend cuda --mutant {}",
                backends::shell_quote(std::filesystem::read_symlink("/proc/self/exe").string()),
                name),
            std::filesystem::path(out) / "device-worker" / name,
            backends::kExternalTimeoutSecondsDefault);
      } catch (const std::exception& e) {
        throw backends::ExternalWorkerFailure{
            fmt::format("the device worker of mutant {} did not start: {}", name, e.what())};
      }
    }
    return worker->run(launch);
  };
}

struct MutantsOptions {
  std::string backend;
  std::string level = "both";
  std::string time_budget = "30s";
  std::uint64_t seed = 1;
  int max_size = 100;
  std::string only; // comma-separated names
  std::string out = "mc-out/mutants";
  std::string report;
  std::string junit;
  bool list = false;
};

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ','))
    if (!name.empty()) names.push_back(name);
  return names;
}

// One line per job: name, level, bug class, what it breaks (a racy one says so first).
std::string format_catalogue(const std::vector<fuzz::MutantJob>& jobs) {
  std::size_t width = 6;
  for (const fuzz::MutantJob& j : jobs)
    width = std::max(width, j.name.size());
  std::string out = fmt::format("{:<{}}  {:<6}  {:<5}  {}\n", "mutant", width, "level", "class",
                                "what it breaks");
  for (const fuzz::MutantJob& j : jobs)
    out += fmt::format("{:<{}}  {:<6}  {:<5}  {}{}{}\n", j.name, width, j.level, j.bug_class,
                       j.racy ? "[racy] " : "", j.memory_safe ? "" : "[out of bounds] ",
                       j.description);
  return out;
}

void write_reports(const MutantsOptions& o, const fuzz::MutantRunOptions& run,
                   const std::vector<fuzz::MutantOutcome>& outcomes) {
  write_json_file("--report", o.report, fuzz::to_json(run, outcomes, true));
  if (o.junit.empty()) return;
  std::vector<JunitCase> cases;
  for (const fuzz::MutantOutcome& m : outcomes) {
    JunitCase jc{.name = fmt::format("{}-{}", m.level, m.name), .seconds = m.seconds};
    if (!m.killed && !fuzz::survival_expected(m, run.backend_name)) {
      jc.failed = true;
      jc.message = fmt::format("mutant {} survived {} cases", m.name, m.cases);
      jc.details = m.description;
    }
    cases.push_back(std::move(jc));
  }
  write_junit(o.junit, "mambacheck.mutants", cases);
}

// Each job against its mutant, in order, until a signal stops them (a campaign cut short by it
// says nothing of a mutant it did not kill).
std::vector<fuzz::MutantOutcome> run_jobs(const std::vector<fuzz::MutantJob>& jobs,
                                          const fuzz::MutantRunOptions& run) {
  Progress progress("mutants", static_cast<std::int64_t>(jobs.size()));
  std::vector<fuzz::MutantOutcome> outcomes;
  for (const fuzz::MutantJob& job : jobs) {
    if (model::interrupted()) break;
    outcomes.push_back(job.run(run));
    if (model::interrupted() && !outcomes.back().killed) {
      outcomes.pop_back();
      break;
    }
    progress.tick(fmt::format("{} {}", job.name, outcomes.back().killed ? "killed" : "SURVIVED"));
  }
  progress.done();
  return outcomes;
}

// Prints each survivor; true when one survived that was not expected to (a racy mutant may
// survive on cuda: no case happened to schedule its race).
bool any_unexpected_survivor(const std::vector<fuzz::MutantOutcome>& outcomes,
                             const std::string& backend_name) {
  bool unexpected = false;
  for (const fuzz::MutantOutcome& m : outcomes) {
    if (m.killed) continue;
    if (fuzz::survival_expected(m, backend_name)) {
      std::cout << fmt::format("survived: {} is racy: none of its {} cases happened to be "
                               "scheduled so that the race shows (not a verdict on the fuzzer; "
                               "on host it must be killed)\n",
                               m.name, m.cases);
      continue;
    }
    unexpected = true;
    std::cout << fmt::format("SURVIVED: {} ({}): the fuzzer did not reach it in {} cases\n", m.name,
                             m.description, m.cases);
  }
  return unexpected;
}

int run_mutants(const MutantsOptions& o) {
  if (o.level != "kernel" && o.level != "engine" && o.level != "both")
    model::fail_input("--level: expected kernel, engine or both, got '{}'", o.level);
  if (o.list) {
    std::cout << format_catalogue(fuzz::select_jobs(mutant_jobs(o.level), split_names(o.only)));
    return kExitOk;
  }
  check_option_range("--max-size", o.max_size, 0, 100);
  check_output_file("--report", o.report);
  check_output_file("--junit", o.junit);
  create_output_dir("--out", o.out);
  const backends::Backend backend =
      o.backend.empty() ? backends::default_backend() : backends::parse_backend(o.backend);
  if (backend == backends::Backend::oracle)
    model::fail_input("--backend: mutants run on host or cuda (the oracle has no mutants)");
  const double seconds = parse_duration_option("--time-budget-per-mutant", o.time_budget);
  std::vector<fuzz::MutantJob> jobs = mutant_jobs(o.level);
  jobs = fuzz::select_jobs(std::move(jobs), split_names(o.only));
  backends::require_backend(backend);

  fuzz::MutantRunOptions run;
  run.seed = o.seed;
  run.seconds_max = seconds;
  run.max_size = o.max_size;
  run.backend_name = std::string(to_string(backend));
  run.backend = backend == backends::Backend::cuda ? device_worker_runner(o.out)
                                                   : backends::mutant_launch_runner(backend);
  run.out_dir = o.out;
  std::cout << fmt::format("{} mutants on the {} backend (MUTATED kernels/runner), seed {}, "
                           "{} s each at most\n",
                           jobs.size(), run.backend_name, run.seed, seconds);
  const std::vector<fuzz::MutantOutcome> outcomes = run_jobs(jobs, run);
  std::cout << fuzz::format_table(outcomes);
  const auto drawn = std::find_if(outcomes.begin(), outcomes.end(),
                                  [](const fuzz::MutantOutcome& m) { return !m.picture.empty(); });
  if (drawn != outcomes.end())
    std::cout << fmt::format("pictures: report.html beside each counterexample (e.g. {})\n",
                             drawn->picture);
  write_reports(o, run, outcomes);
  if (model::interrupted()) {
    std::cout << fmt::format("mutants: interrupted by {} after {} of {} mutants\n",
                             model::signal_name(model::interrupt_signal()), outcomes.size(),
                             jobs.size());
    return 128 + model::interrupt_signal();
  }
  return any_unexpected_survivor(outcomes, run.backend_name) ? kExitMismatch : kExitOk;
}

void add_mutants_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<MutantsOptions>();
  CLI::App* cmd =
      app.add_subcommand("mutants", "Run the fuzzer against each mutant; every one must be killed");
  cmd->add_option("--backend", o->backend, "host or cuda (default: cuda when a GPU is present)");
  cmd->add_option("--level", o->level,
                  "kernel (kernel mutants, launch cases), engine (runner mutants) or both "
                  "(default)");
  cmd->add_option("--time-budget-per-mutant", o->time_budget,
                  "Give up on a mutant after this long: 30s (default), 2m");
  cmd->add_option("--seed", o->seed, "Campaign seed of every mutant run (default 1)");
  cmd->add_option("--max-size", o->max_size, "Kernel level: largest generator size (default 100)");
  cmd->add_option("--only", o->only, "Comma-separated mutant names (default: all)");
  cmd->add_option("--out", o->out, "Counterexamples go to OUT/NAME/ (default mc-out/mutants)");
  cmd->add_option("--report", o->report, "Write a JSON report (with timings)");
  cmd->add_option("--junit", o->junit, "Write JUnit XML (one test case per mutant)");
  cmd->add_flag("--list", o->list,
                "Print the catalogue (mutant, level, bug class, what it breaks) and exit");
  cmd->callback([o, &action] { action = [o] { return run_mutants(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_mutants_command);

} // namespace mc::cli
