// `mambacheck fuzz --level engine`: see fuzz_engine.h.
#include "cli/fuzz_engine.h"

#include "backends/external_engine.h"
#include "cli/commands.h"
#include "cli/coverage_option.h"
#include "cli/progress.h"
#include "fuzz/engine/engine_fuzz.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <iostream>

namespace mc::cli {
namespace {

inline constexpr std::int64_t kEngineCasesDefault = 200;
inline constexpr std::int64_t kEngineCasesMax = std::int64_t{1} << 40;

void resolve_mutant(const std::string& name, fuzz::EngineFuzzOptions& o) {
  if (name.empty() || name == "none") return;
  if (const gpu::MutantInfo* info = gpu::find_mutant(name)) {
    switch (info->level) {
    case gpu::MutantLevel::runner:
      o.runner_mutant = *gpu::engine::find_runner_mutant(name);
      break;
    case gpu::MutantLevel::scheduler:
      o.scheduler_mutant = *harness::find_scheduler_mutant(name);
      break;
    case gpu::MutantLevel::kernel:
      o.kernel_mutant = *gpu::find_kernel_mutant(name);
      break;
    }
    return;
  }
  model::fail_input("--mutant: no kernel, runner or scheduler mutant named '{}' (see mambacheck "
                    "mutants --list)",
                    name);
}

void print_summary(const fuzz::EngineFuzzOptions& o, const fuzz::EngineFuzzReport& r) {
  const double s = r.seconds > 0 ? r.seconds : 1e-9;
  std::cout << fmt::format("engine level, backend {}, seed {}{}: {} cases, {} steps in {:.1f} s "
                           "({:.1f} cases/s, {:.0f} steps/s), {:.1f} MiB of arenas compared\n",
                           o.backend_name, o.seed,
                           o.jobs > 1 ? fmt::format(", {} jobs", o.jobs) : "", r.cases, r.steps, r.seconds,
                           static_cast<double>(r.cases) / s, static_cast<double>(r.steps) / s,
                           static_cast<double>(r.bytes_compared) / (1 << 20));
  std::string presets, runners, scheduling;
  for (const auto& [name, n] : r.cases_by_preset)
    presets += fmt::format(" {}={}", name, n);
  for (const auto& [name, n] : r.cases_by_runner)
    runners += fmt::format(" {}={}", name, n);
  for (const auto& [name, n] : r.cases_by_scheduling)
    scheduling += fmt::format(" {}={}", name, n);
  std::cout << "  presets:" << presets << "\n  runners:" << runners
            << "\n  scheduling:" << scheduling << "\n";
}

void print_finding(const fuzz::EngineFinding& f, double shrink_seconds) {
  std::cout << fmt::format("{} (engine case seed {}, size {}): {}\n",
                           f.skipped ? "KNOWN" : "MISMATCH", f.first_case_seed, f.first_size,
                           f.failure);
  std::cout << fmt::format("  signature {}\n", f.signature.to_string());
  std::cout << fmt::format("  {} ({}); {} failing case{} so far\n", f.runs.summary(),
                           fuzz::to_string(f.signature.classification), f.cases,
                           f.cases == 1 ? "" : "s");
  if (f.signature.classification != fuzz::Classification::deterministic)
    for (std::size_t i = 0; i < f.runs.run_failures.size(); ++i)
      std::cout << fmt::format("    run {}: {}\n", i + 1,
                               f.runs.run_failures[i].empty() ? "held" : f.runs.run_failures[i]);
  if (!f.counterexample) return;
  const fuzz::EngineCounterexample& cx = *f.counterexample;
  if (cx.shrink_kept)
    std::cout << fmt::format("  shrunk to {} steps, {} requests ({} shrinks, {} candidates; the "
                             "shrunk case {}): {}\n",
                             cx.steps, cx.requests, cx.shrink_steps, cx.shrink_tried,
                             cx.saved_runs.summary(), cx.failure);
  else
    std::cout << fmt::format("  not shrunk: no smaller case failed on at least half of its reruns "
                             "({} candidates tried); the original is saved\n",
                             cx.shrink_tried);
  if (cx.shrink_timed_out)
    std::cout << fmt::format("  the shrink stopped at its time bound ({} s, --shrink-time): on "
                             "another machine or load it may stop elsewhere\n",
                             shrink_seconds);
  std::cout << fmt::format("  case: {}\n", cx.description);
  if (!cx.dir.empty())
    std::cout << fmt::format("  counterexample: {} (before shrinking: {}), report {}\n",
                             cx.shrunk_trace.string(), cx.original_trace.string(),
                             (cx.dir / "report.txt").string());
  if (!cx.picture.empty()) std::cout << fmt::format("  picture: {}\n", cx.picture.string());
  if (!cx.steps_view.empty())
    std::cout << fmt::format("  steps as the oracle saw them: {}\n", cx.steps_view.string());
  std::cout << fmt::format("  reproduce: {}\n", cx.reproduce);
  if (!cx.replay.empty()) std::cout << fmt::format("  replay the trace: {}\n", cx.replay);
}

EngineLevelResult run_engine_level_here(const EngineLevelRequest& q) {
  if (q.cases < 0 || q.cases > kEngineCasesMax) model::fail_input("--cases: got {}", q.cases);
  fuzz::EngineFuzzOptions o{.seed = q.seed, .max_size = q.max_size, .fixed = q.fixed};
  o.cases_max = q.cases > 0 ? q.cases : (q.seconds_max > 0 ? kEngineCasesMax : kEngineCasesDefault);
  o.seconds_max = q.seconds_max;
  o.executor = q.backend == backends::Backend::cuda ? gpu::engine::ExecutorKind::cuda
                                                    : gpu::engine::ExecutorKind::host;
  o.backend_name = std::string(to_string(q.backend));
  o.out_dir = q.out;
  resolve_mutant(q.mutant, o);
  o.isolate = q.isolate && q.backend == backends::Backend::host;
  o.case_timeout_seconds = q.case_timeout;
  o.keep_going = q.keep_going;
  o.reruns = q.reruns;
  o.shrink.seconds_max = q.shrink_seconds;
  o.repeat = q.repeat;
  o.skip_signatures = q.skip_signatures;
  o.first_case = q.first_case;
  o.steer_epoch = q.steer_epoch;
  o.shard = q.shard;
  o.workers = q.workers;
  o.jobs = q.workers ? q.jobs : 1;
  std::unique_ptr<backends::ExternalEngineSource> external;
  if (!q.external.empty()) {
    if (o.runner_mutant != gpu::engine::RunnerMutant::none ||
        o.kernel_mutant != gpu::Mutant::none ||
        o.scheduler_mutant != harness::SchedulerMutant::none)
      model::fail_input("--mutant: not with --external (the worker runs its own kernels)");
    // The campaign's own adapter runs a finding's reruns and shrink candidates and tells the
    // launch kinds its kernels cover; the cases run in the workers' adapters where there are
    // workers.
    external = backends::start_external_engine(
        q.external, q.external_timeout,
        std::filesystem::absolute(std::filesystem::path(q.out) / "external" / "engine-worker.log"));
    o.external = external.get();
    o.isolate = false;
    // A worker's case includes the adapter's answers, which have a timeout of their own: that
    // one speaks first, as the adapter's failure.
    o.case_timeout_seconds = q.case_timeout + q.external_timeout;
    o.backend_name = "external";
    o.backend_args = fmt::format("--external {}", backends::shell_quote(q.external));
    if (q.external_timeout != backends::kExternalTimeoutSecondsDefault)
      o.backend_args += fmt::format(" --external-timeout {}", q.external_timeout);
    o.fixed.kinds = external->kinds();
  }
  const std::int64_t first = fuzz::first_case_of(q.shard, q.first_case);
  Progress progress("fuzz engine",
                    q.cases > 0 && first < o.cases_max
                        ? (o.cases_max - first + q.shard.count - 1) / q.shard.count
                        : 0,
                    q.seconds_max);
  o.on_case = [&progress](std::int64_t, std::int64_t steps, const std::string& preset) {
    progress.tick(fmt::format("{} steps, {}", steps, preset));
  };
  o.on_finding = [&progress, &o, findings = std::int64_t{0}](const fuzz::EngineFinding& f) mutable {
    progress.set_findings(++findings);
    progress.done();
    print_finding(f, o.shrink.seconds_max);
  };
  const fuzz::EngineFuzzReport r = fuzz::run_engine_fuzz(o);
  progress.done();
  print_summary(o, r);
  if (!r.stopped.empty()) std::cout << "engine level: stopped early: " << r.stopped << "\n";
  if (o.steer_epoch > 0)
    std::cout << fmt::format("  steer: epochs of {} cases, {} boosted; {} epoch starts waited "
                             "{:.1f} s for the epoch before to end\n",
                             o.steer_epoch, r.steer_epochs.size(), r.steer_barriers,
                             r.steer_stall_seconds);
  EngineLevelResult result{.report = fuzz::to_json(o, r)};
  if (!q.external.empty()) result.report["external"] = q.external;
  const std::vector<std::string> missing = report_coverage(q.required_coverage, r.coverage);
  if (!q.required_coverage.empty()) result.report["coverage_missing"] = missing;
  if (!missing.empty()) result.exit_code = kExitMismatch;
  const std::string campaign = fmt::format("engine-{}-seed{}", o.backend_name, o.seed);
  if (r.interrupted != 0) {
    result.junit.push_back(interrupted_case("engine", r.interrupted, r.cases, r.next_case));
    std::cout << interrupted_line("engine", r.interrupted, r.cases, r.next_case) << "\n";
    if (o.steer_epoch > 0)
      std::cout << "engine level: a steered campaign cannot be resumed (--steer refuses "
                   "--resume-from): run it again from its first case\n";
  }
  if (r.findings.empty()) {
    result.junit.push_back(JunitCase{.name = campaign, .seconds = r.seconds});
    std::cout << "engine level: all cases held\n";
    return result;
  }
  std::cout << fmt::format("engine level: {} finding{} ({} failing cases):\n", r.findings.size(),
                           r.findings.size() == 1 ? "" : "s", r.failing_cases());
  for (const fuzz::EngineFinding& f : r.findings) {
    std::cout << fmt::format("  {} {}: {} cases, {}{}\n", f.skipped ? "known" : "FAILS",
                             f.signature.to_string(), f.cases, f.runs.summary(),
                             f.counterexample && !f.counterexample->dir.empty()
                                 ? ", " + f.counterexample->dir.string()
                                 : "");
    result.junit.push_back(finding_case(
        campaign, f.signature, f.skipped, f.cases, f.failure, f.runs,
        f.counterexample ? fmt::format("{}\nreproduce: {}", f.counterexample->description,
                                       f.counterexample->reproduce)
                         : ""));
  }
  if (r.first_failing() != nullptr) result.exit_code = kExitMismatch;
  return result;
}

} // namespace

EngineLevelResult run_engine_level(const EngineLevelRequest& q) {
  try {
    return run_engine_level_here(q);
  } catch (const backends::ExternalWorkerFailure& failure) { // it cannot be used: exit 3
    throw model::EnvironmentError(failure.message);
  }
}

} // namespace mc::cli
