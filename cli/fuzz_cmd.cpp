// `mambacheck fuzz`: the main job. A kernel-level campaign: generated launch cases of every
// kind on the oracle and a backend (cuda when a device is present, host otherwise),
// compared exactly; a failure is shrunk and written as case directories, and the exit
// message prints the command that replays it (exit 1).
#include "backends/backend.h"
#include "backends/block_manager_worker.h"
#include "backends/external_backend.h"
#include "backends/external_engine.h"
#include "backends/mutant_backend.h"
#include "cli/commands.h"
#include "cli/external_option.h"
#include "cli/coverage_option.h"
#include "cli/duration.h"
#include "cli/fuzz_engine.h"
#include "cli/junit.h"
#include "cli/mps.h"
#include "cli/output_paths.h"
#include "cli/parallel_option.h"
#include "cli/progress.h"
#include "cli/shard_option.h"
#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/engine/engine_fuzz.h"
#include "gpu/cuda_backend.h"
#include "gpu/mutant.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

namespace mc::cli {
namespace {

inline constexpr std::int64_t kCasesMax = std::int64_t{1} << 40;

struct FuzzOptions {
  std::string level = "kernel";
  std::string backend;
  std::uint64_t seed = 1;
  std::int64_t cases = 0;
  std::string time_budget;
  int max_size = 100;
  std::int32_t block_size = 0;   // engine level: 0 draws it per case
  std::int32_t token_budget = 0; // engine level: 0 draws it per case
  bool async = false;            // engine level: every case async, not a quarter of them
  bool steer = false;            // engine level: steer the generator by the coverage so far
  std::int64_t steer_epoch = 0;  // its epoch (0: kSteerEpochDefault)
  std::string steer_boosts;      // engine level: draw every case with these boosts
  std::string out = "mc-out";
  std::string report;
  std::string junit;
  std::string mutant;   // a kernel or runner mutant (engine level: either)
  std::string external; // kernel level: a worker command running the kernels under test
  double external_timeout = backends::kExternalTimeoutSecondsDefault;
  std::string block_manager; // engine level: a worker command serving the KV cache manager
  double block_manager_timeout = backends::kBlockManagerTimeoutSecondsDefault;
  bool keep_going = false;    // go on after a finding
  bool stop_at_first = false; // stop at the first finding even under --time-budget
  int reruns = fuzz::kRerunsDefault;
  std::string shrink_time = "60s"; // a duration, or "none": candidates are the only bound
  int repeat = 1;
  std::vector<std::string> kinds; // launch kinds drawn (kernel level); empty: all
  std::string focus;              // a generator preset (kernel level); empty: the backend's mix
  bool no_isolate = false;        // run cases in this process (a crash ends all)
  double case_timeout = 300.0;    // a case in a worker running longer is a finding
  std::vector<std::string> skip_signatures;
  std::int64_t resume_from = 0; // the index of the first case (an interrupted campaign's)
  std::vector<std::string> require_coverage; // features every level run must reach, or all
  ShardOptions shard_options;                // --shard K/N, --shards N
  ParallelOptions parallel_options;          // --jobs, --devices, --workers
  Parallel parallel;                         // what they come to
  fuzz::Shard shard;                         // chosen from those or the scheduler's environment

  // Under a time budget a campaign goes on after a finding unless told otherwise.
  bool keeps_going() const { return keep_going || (!time_budget.empty() && !stop_at_first); }
};

// The shrink's time bound in seconds; 0: none.
double shrink_seconds(const FuzzOptions& o) {
  if (o.shrink_time == "none") return 0.0;
  return parse_duration_option("--shrink-time", o.shrink_time);
}

// How reproduce lines name the backend: `--backend host` or `--external 'COMMAND'` (the
// mutant, when there is one, is named apart).
std::string backend_arguments(const FuzzOptions& o, backends::Backend backend) {
  if (o.external.empty()) return fmt::format("--backend {}", to_string(backend));
  std::string args = fmt::format("--external {}", backends::shell_quote(o.external));
  if (o.external_timeout != backends::kExternalTimeoutSecondsDefault)
    args += fmt::format(" --external-timeout {}", o.external_timeout);
  return args;
}

// How a case worker makes the campaign's backend (cli/case_worker_cmd.cpp).
nlohmann::json worker_backend(const FuzzOptions& o, backends::Backend backend) {
  if (o.external.empty())
    return {{"name", to_string(backend)}, {"mutant", o.mutant.empty() ? "none" : o.mutant}};
  return {{"name", "external"},
          {"command", o.external},
          {"timeout", o.external_timeout},
          {"dir", std::filesystem::absolute(std::filesystem::path(o.out) / "external").string()}};
}

// --steer's epoch; 0: not steered.
std::int64_t steer_epoch(const FuzzOptions& o) {
  return o.steer ? (o.steer_epoch > 0 ? o.steer_epoch : fuzz::kSteerEpochDefault) : 0;
}

// The campaign's options, either level: `seconds_max` its share of the time budget.
fuzz::CampaignOptions campaign_options(const FuzzOptions& o, backends::Backend backend,
                                       bool engine, double seconds_max) {
  fuzz::CampaignOptions c;
  c.seed = o.seed;
  c.max_size = o.max_size;
  c.seconds_max = seconds_max;
  const std::int64_t cases_default = engine ? 200 : 2000;
  c.cases_max = o.cases > 0 ? o.cases : (seconds_max > 0 ? kCasesMax : cases_default);
  c.first_case = o.resume_from;
  c.shard = o.shard;
  c.backend_name = o.external.empty() ? std::string(to_string(backend)) : "external";
  c.backend_args = backend_arguments(o, backend);
  c.external = o.external;
  c.mutant = o.mutant;
  c.out_dir = o.out;
  c.shrink = engine ? fuzz::kEngineShrinkLimits : fuzz::ShrinkLimits{};
  c.shrink.seconds_max = shrink_seconds(o);
  c.keep_going = o.keeps_going();
  c.reruns = o.reruns;
  c.repeat = o.repeat;
  c.skip_signatures = o.skip_signatures;
  // A kernel that writes out of bounds must cost one finding, not the campaign: every case runs
  // in a case worker, and on the host backend the reruns and shrink candidates of a finding
  // each run in a forked child (fuzz/isolate.h).
  c.isolate = backend == backends::Backend::host && o.external.empty() && !o.no_isolate;
  if (o.parallel.workers) c.workers = case_worker_start(o.parallel, worker_backend(o, backend));
  c.jobs = o.parallel.jobs;
  // A worker's case with --external includes the adapter's answer, which has a timeout of its
  // own: that one speaks first, as the adapter's crash.
  c.case_timeout_seconds = o.case_timeout + (o.external.empty() ? 0.0 : o.external_timeout);
  return c;
}

void print_kernel_summary(const fuzz::CampaignOptions& c, const fuzz::CampaignReport& r) {
  std::cout << fmt::format("kernel level, backend {}, seed {}{}: {} cases in {:.1f} s ({:.0f} "
                           "cases/s), {} copies and {:.1f} MiB of arenas compared\n",
                           c.backend_name, c.seed,
                           c.jobs > 1 ? fmt::format(", {} jobs", c.jobs) : "", r.cases, r.seconds,
                           r.seconds > 0 ? static_cast<double>(r.cases) / r.seconds : 0.0,
                           r.total("copies_compared"),
                           static_cast<double>(r.total("arena_bytes_compared")) / (1 << 20));
  std::cout << "  kinds:" << counts_line(r, "kind") << "\n  sizes:" << counts_line(r, "size_class")
            << "\n";
  if (!r.backend_replaced.empty()) std::cout << "kernel level: " << r.backend_replaced << "\n";
  if (!r.stopped.empty()) std::cout << "kernel level: stopped early: " << r.stopped << "\n";
}

void print_kernel_finding(const fuzz::CampaignOptions& c, const fuzz::Finding& f) {
  std::cout << fmt::format("{} (case seed {}, size {}): {}\n",
                           f.skipped ? "KNOWN" : "MISMATCH", f.first_case_seed, f.first_size,
                           f.failure);
  const std::string features = fmt::format("{}", fmt::join(f.signature.features, ", "));
  std::cout << fmt::format("  signature {} (the failing row: {})\n", f.signature.to_string(),
                           features.empty() ? "none" : features);
  std::cout << fmt::format("  {} ({}); {} failing case{} so far\n", f.runs.summary(),
                           fuzz::to_string(f.signature.classification), f.cases,
                           f.cases == 1 ? "" : "s");
  for (std::size_t i = 0; i < f.rows_in_runs.size(); ++i)
    std::cout << fmt::format("    run {}: {}\n", i + 1, f.rows_in_runs[i]);
  const auto* cx = f.counterexample_as<fuzz::KernelCounterexample>();
  if (cx == nullptr) return;
  if (cx->shrink_kept)
    std::cout << fmt::format("  shrunk in {} steps ({} candidates tried; the shrunk case {}): {}\n",
                             cx->shrink_steps, cx->shrink_tried, cx->saved_runs.summary(),
                             cx->description);
  else
    print_not_shrunk(cx->shrink_tried);
  if (cx->shrink_timed_out) print_shrink_timed_out(c);
  std::cout << fmt::format("  counterexample: {} (before shrinking: {})\n",
                           cx->shrunk_dir.string(), cx->original_dir.string());
  if (!cx->picture.empty()) std::cout << fmt::format("  picture: {}\n", cx->picture.string());
  const std::string backend_args =
      c.backend_args + (c.mutant.empty() ? "" : " --mutant " + c.mutant);
  std::cout << fmt::format("  reproduce: {}{}\n", f.reproduce,
                           f.signature.classification == fuzz::Classification::nondeterministic
                               ? fmt::format(" --reruns {}", std::max(c.reruns, 1))
                               : "");
  std::cout << fmt::format("  rerun the campaign: mambacheck fuzz {} --seed {} --cases "
                           "{} --max-size {}\n",
                           backend_args, c.seed, f.first_case_seed - c.seed + 1, c.max_size);
}

// The cases this process runs of campaign `c`, for the progress line; 0 under a time budget
// (unknown).
std::int64_t cases_in_shard(const FuzzOptions& o, const fuzz::CampaignOptions& c) {
  if (o.cases == 0) return 0;
  const std::int64_t first = fuzz::first_case_of(c.shard, c.first_case);
  return first >= c.cases_max ? 0 : (c.cases_max - first + c.shard.count - 1) / c.shard.count;
}

// What one level of `fuzz` gives: its report, JUnit cases and exit code.
struct LevelResult {
  int exit_code = kExitOk;
  nlohmann::json report;
  std::vector<JunitCase> junit;
};

// Runs `level`: progress line, each finding as it comes, the summary, the report (with the
// coverage required of it), one JUnit case per signature or one passing case.
LevelResult run_level(const fuzz::CampaignOptions& options, fuzz::CampaignLevel& level,
                      std::int64_t cases_planned, const model::CoverageRequirement& required) {
  const bool kernel = level.name() == "kernel";
  const std::string prefix = kernel ? "" : "engine level: "; // the kernel level's lines say none
  fuzz::CampaignOptions c = options;
  Progress progress(kernel ? "fuzz kernel" : "fuzz engine", cases_planned, c.seconds_max);
  c.on_case = [&progress](std::int64_t, const std::string& what) { progress.tick(what); };
  c.on_finding = [&, findings = std::int64_t{0}](const fuzz::Finding& f) mutable {
    progress.set_findings(++findings);
    progress.done();
    kernel ? print_kernel_finding(c, f) : print_engine_finding(c, f);
  };
  fuzz::CampaignReport r;
  try {
    r = fuzz::run_campaign(c, level);
  } catch (const backends::ExternalWorkerFailure& failure) { // it cannot be used: exit 3
    progress.done();
    throw model::EnvironmentError(failure.message);
  }
  progress.done();
  if (kernel)
    print_kernel_summary(c, r);
  else
    print_engine_summary(c, r, dynamic_cast<const fuzz::EngineLevel&>(level));
  LevelResult result{.report = fuzz::to_json(c, level, r)};
  const std::vector<std::string> missing = report_coverage(required, r.coverage);
  if (!required.empty()) result.report["coverage_missing"] = missing;
  if (!missing.empty()) result.exit_code = kExitMismatch;
  const std::string campaign = fmt::format("{}-{}-seed{}", level.name(), c.backend_name, c.seed);
  if (r.findings.empty()) result.junit.push_back(JunitCase{.name = campaign, .seconds = r.seconds});
  for (const fuzz::Finding& f : r.findings)
    result.junit.push_back(finding_case(
        campaign, f.signature.to_string(), fuzz::to_string(f.signature.classification), f.skipped,
        f.cases, f.failure, f.runs.summary(),
        f.saved() ? fmt::format("{}\nreproduce: {}", f.description, f.reproduce) : ""));
  if (r.interrupted != 0) {
    const std::string_view signal = model::signal_name(r.interrupted);
    result.junit.push_back(interrupted_case(level.name(), signal, r.cases, r.next_case));
    std::cout << interrupted_line(level.name(), signal, r.cases, r.next_case) << "\n";
    if (result.report.contains("steer"))
      std::cout << "engine level: a steered campaign cannot be resumed (--steer refuses "
                   "--resume-from): run it again from its first case\n";
  }
  if (r.findings.empty()) {
    std::cout << prefix << "all cases held\n";
    return result;
  }
  std::cout << fmt::format("{}{} finding{} ({} failing cases):\n", prefix, r.findings.size(),
                           r.findings.size() == 1 ? "" : "s", r.failing_cases());
  for (const fuzz::Finding& f : r.findings)
    std::cout << fmt::format("  {} {}: {} cases, {}{}\n", f.skipped ? "known" : "FAILS",
                             f.signature.to_string(), f.cases, f.runs.summary(),
                             f.counterexample_dir.empty() ? "" : ", " + f.counterexample_dir.string());
  if (r.first_failing() != nullptr) result.exit_code = kExitMismatch;
  return result;
}

// A runner for the kernel level's runs after a device fault: this program as a worker process
// (`mambacheck worker`), started here and kept in `worker`.
fuzz::LaunchRunner device_worker_runner(const FuzzOptions& o,
                                        std::shared_ptr<backends::ExternalWorker>& worker) {
  std::string command = fmt::format(
      "exec {} worker --backend cuda",
      backends::shell_quote(std::filesystem::read_symlink("/proc/self/exe").string()));
  if (!o.mutant.empty()) command += fmt::format(" --mutant {}", o.mutant);
  try {
    worker = backends::start_worker_in(command, std::filesystem::path(o.out) / "device-worker",
                                       o.case_timeout);
  } catch (const backends::ExternalWorkerFailure& failure) {
    throw model::EnvironmentError(failure.message);
  } catch (const std::filesystem::filesystem_error& e) {
    throw model::EnvironmentError(fmt::format("the device worker's directory: {}", e.what()));
  }
  return fuzz::LaunchRunner(
      [worker](const model::LaunchCase& launch) { return worker->run(launch); });
}

LevelResult run_kernel_level(const FuzzOptions& o, backends::Backend backend, double seconds_max,
                             const model::CoverageRequirement& required) {
  const fuzz::CampaignOptions c = campaign_options(o, backend, false, seconds_max);
  fuzz::KernelLevelOptions k{.focus = o.focus};
  if (!o.focus.empty())
    k.gen = *fuzz::gen_options_named(o.focus);
  else if (backend == backends::Backend::cuda)
    k.gen.weights.grid *= 2; // the device makes big grids cheap
  for (const std::string& kind : o.kinds)
    k.gen.kinds.push_back(model::parse_launch_kind(kind));
  // --mutant: the backend's kernels are that variant (gpu/mutant.h)
  k.backend = backends::kernel_runner(
      backend, o.mutant.empty() ? gpu::Mutant::none : backends::parse_kernel_mutant(o.mutant));
  if (!c.mutant.empty())
    std::cout << fmt::format("kernel level: the {} backend runs MUTATED kernels: {}\n",
                             c.backend_name, c.mutant);
  // Under a cooperative launch every CTA of the fused kernel runs at once and the programs of
  // one request read before any of them writes; started by tickets they interleave, which is
  // where a race between them shows (docs/fuzzing.md, "Hunting races").
  if (o.focus == "races" && backend == backends::Backend::cuda &&
      std::getenv("MC_FUSED_START") == nullptr) {
    setenv("MC_FUSED_START", "ticket", 0);
    std::cout << "kernel level: --focus races starts the fused kernel by tickets "
                 "(MC_FUSED_START=ticket)\n";
  }
  std::unique_ptr<backends::ExternalWorker> worker; // --external: the campaign's backend
  if (!o.external.empty()) {
    const std::filesystem::path work = std::filesystem::path(o.out) / "external";
    worker = backends::attach_external_worker(k.gen.kinds, k.backend,
                                              {.command = o.external,
                                               .work_dir = work,
                                               .log_file = work / "worker.log",
                                               .timeout_seconds = o.external_timeout});
  }
  // cuda: a kernel fault loses this process's CUDA context; later runs go to this program as
  // a worker process (`mambacheck worker`), which the external backend restarts after each.
  std::shared_ptr<backends::ExternalWorker> device_worker;
  if (backend == backends::Backend::cuda && o.external.empty())
    k.replace_backend = [&o, &device_worker] { return device_worker_runner(o, device_worker); };
  fuzz::KernelLevel level(c, std::move(k));
  return run_level(c, level, cases_in_shard(o, c), required);
}

LevelResult run_engine_level(const FuzzOptions& o, backends::Backend backend, double seconds_max,
                             const fuzz::EngineCaseFixed& fixed,
                             const model::CoverageRequirement& required) {
  fuzz::CampaignOptions c = campaign_options(o, backend, true, seconds_max);
  std::unique_ptr<backends::ExternalEngineSource> adapter;
  // The campaign's own block manager: cases run here, reruns, shrinking; each case worker
  // starts its own from the command.
  const std::unique_ptr<backends::BlockManagerWorker> manager =
      start_block_manager(o.block_manager, o.block_manager_timeout);
  fuzz::EngineLevelOptions e{
      .fixed = fixed,
      .steer_epoch = steer_epoch(o),
      .run = {.executor = backend == backends::Backend::cuda ? model::Backend::cuda
                                                             : model::Backend::host}};
  fuzz::set_engine_mutant(c.mutant, e);
  if (!o.external.empty()) {
    if (!c.mutant.empty())
      model::fail_input("--mutant: not with --external (the worker runs its own kernels)");
    // The campaign's own adapter runs a finding's reruns and shrink candidates and tells the
    // launch kinds its kernels cover; the cases run in the workers' adapters where there are
    // workers.
    adapter = backends::start_external_engine(
        o.external, o.external_timeout,
        std::filesystem::absolute(c.out_dir / "external" / "engine-worker.log"));
    e.run.external = adapter.get();
    e.fixed.kinds = adapter->kinds();
    c.isolate = false;
  }
  e.run.block_manager = o.block_manager;
  e.run.block_manager_timeout = o.block_manager_timeout;
  e.run.manager = manager.get();
  if (manager) e.run.isolate = false;
  fuzz::EngineLevel level(c, std::move(e));
  return run_level(c, level, cases_in_shard(o, c), required);
}

// Under MPS the case workers of a GPU are clients of one server, and a kernel fault in one of
// them ends the server's work for all: the cases the others ran at that moment fail too (cuda
// errors "device(s) busy or unavailable" or an illegal address they did not cause), and so do
// the campaign's own reruns. Measured on an H200 with a faulting kernel mutant: 1 finding with
// --mps off, 8 with MPS. Such findings say the kernels fault somewhere, not which case.
void print_mps_fault_caveat(const nlohmann::json& report) {
  std::int64_t faults = 0;
  const auto count = [&faults](const nlohmann::json& level) {
    if (!level.is_object() || !level.contains("findings")) return;
    for (const nlohmann::json& f : level.at("findings"))
      if (f.value("classification", "") == "backend-error") ++faults;
  };
  count(report);
  if (report.contains("kernel")) count(report.at("kernel"));
  if (report.contains("engine")) count(report.at("engine"));
  if (faults == 0) return;
  std::cout << fmt::format(
      "fuzz: {} finding{} of backend errors under MPS: a device fault in one case worker fails the "
      "cases the other workers of its GPU run at that moment; rerun with --mps off to tell which "
      "case faulted (docs/fuzzing.md, MPS)\n",
      faults, faults == 1 ? "" : "s");
}

// The options every level reads, refused (one line, exit 2) before anything runs.
void check_campaign_options(const FuzzOptions& o) {
  if (o.level != "kernel" && o.level != "engine" && o.level != "both")
    model::fail_input("--level: expected kernel, engine or both, got '{}'", o.level);
  if (o.cases < 0 || o.cases > kCasesMax) model::fail_input("--cases: got {}", o.cases);
  // The campaign's cases: --cases, else 2000, or unbounded under a time budget.
  const std::int64_t cases_planned = o.cases > 0               ? o.cases
                                     : !o.time_budget.empty() ? kCasesMax
                                     : o.level == "engine"    ? 200
                                                              : 2000;
  if (o.resume_from < 0 || o.resume_from >= cases_planned)
    model::fail_input("--resume-from: expected a case index in 0..{}, got {}", cases_planned - 1,
                      o.resume_from);
  check_output_file("--report", o.report);
  check_output_file("--junit", o.junit);
  create_output_dir("--out", o.out);
  check_option_range("--max-size", o.max_size, 0, 100);
  if (!o.external.empty() && !o.backend.empty())
    model::fail_input("--external and --backend: give one of them");
  check_option_range("--reruns", o.reruns, 0, 1000);
  shrink_seconds(o); // refuses a malformed one before any case runs
  check_option_range("--repeat", o.repeat, 1, 1000);
  if (o.keep_going && o.stop_at_first)
    model::fail_input("--keep-going and --stop-at-first: give one of them");
  check_timeout_option("--external-timeout", o.external_timeout);
  check_timeout_option("--block-manager-timeout", o.block_manager_timeout);
  check_timeout_option("--case-timeout", o.case_timeout);
}

// The options of one level only, refused where the other level runs alone.
void check_level_options(const FuzzOptions& o) {
  if (o.level == "kernel" && (o.block_size != 0 || o.token_budget != 0))
    model::fail_input("--block-size and --token-budget: engine level only (--level engine)");
  if (o.level == "kernel" && o.async)
    model::fail_input("--async: engine level only (--level engine): it schedules steps");
  if (o.level == "kernel" && (o.steer || !o.steer_boosts.empty()))
    model::fail_input("--steer and --steer-boosts: engine level only (--level engine)");
  if (o.steer_epoch != 0 && !o.steer) model::fail_input("--steer-epoch: only with --steer");
  if (o.steer_epoch < 0 || o.steer_epoch > kCasesMax)
    model::fail_input("--steer-epoch: expected a number of cases of at least 1, got {}",
                      o.steer_epoch);
  if (!o.kinds.empty() && o.level == "engine")
    model::fail_input("--kinds: kernel level only (the engine level runs what its steps need)");
  if (!o.focus.empty() && o.level == "engine") model::fail_input("--focus: kernel level only");
  if (!o.focus.empty() && !fuzz::gen_options_named(o.focus))
    model::fail_input("--focus: expected {}, got '{}'", fuzz::kGenFocusNames, o.focus);
  if (o.level == "engine") return;
  if (!o.mutant.empty() && !o.external.empty())
    model::fail_input("--mutant: not with --external (the worker runs its own kernels)");
  const gpu::MutantInfo* named = gpu::find_mutant(o.mutant);
  if (named != nullptr && named->level != gpu::MutantLevel::kernel && o.level == "kernel")
    model::fail_input("--mutant: '{}' is a {} mutant: use --level engine", o.mutant,
                      gpu::to_string(named->level));
}

// The engine level's fixed sizes and steering, checked as the engine level checks them.
fuzz::EngineCaseFixed engine_fixed(const FuzzOptions& o) {
  fuzz::EngineCaseFixed fixed;
  if (o.block_size != 0) fixed.block_size = o.block_size;
  if (o.token_budget != 0) fixed.token_budget = o.token_budget;
  fixed.async_scheduling = o.async;
  if (!o.steer_boosts.empty()) fixed.steer = fuzz::parse_steer_boosts(o.steer_boosts);
  if (o.level != "kernel")
    fuzz::check_engine_options({.first_case = o.resume_from, .shard = o.shard},
                               {.fixed = fixed, .steer_epoch = steer_epoch(o)});
  return fixed;
}

// The backend (with --external: host, which only sizes the generator) and where the cases run:
// case workers, devices, MPS (held in `mps` for the whole campaign).
backends::Backend resolve_backend(FuzzOptions& o, std::unique_ptr<MpsSession>& mps) {
  const backends::Backend backend = !o.external.empty() ? backends::Backend::host
                                    : o.backend.empty() ? backends::default_backend()
                                                        : backends::parse_backend(o.backend);
  if (backend == backends::Backend::oracle)
    model::fail_input("--backend: fuzz compares the oracle with host or cuda");
  backends::require_backend(backend);
  const model::Backend case_backend = o.external.empty() ? backend : model::Backend::external;
  const std::optional<int> devices_visible =
      case_backend == model::Backend::host ? std::optional<int>(0) : gpu::cuda_device_count();
  o.parallel = resolve_parallel(o.parallel_options, case_backend, o.no_isolate, usable_cores(),
                                devices_visible, case_backend != model::Backend::host && mps_available());
  if (o.parallel.mps) {
    std::string why_not;
    mps = MpsSession::start(why_not);
    if (mps) {
      std::cout << "fuzz: " << mps->line() << "\n";
    } else {
      if (o.parallel_options.mps == "on") model::fail_input("--mps on: {}", why_not);
      o.parallel = resolve_parallel(o.parallel_options, case_backend, o.no_isolate,
                                    usable_cores(), devices_visible, false);
      std::cout << "fuzz: MPS: " << why_not << "; the case workers take turns on each GPU\n";
    }
  }
  // The reruns and shrinking of a finding run in this process: on the first device listed.
  if (backend == backends::Backend::cuda && !o.parallel.devices.empty() &&
      o.parallel.devices.front() != 0)
    gpu::use_cuda_device(o.parallel.devices.front());
  if (const std::string line = devices_line(o.parallel); !line.empty())
    std::cout << "fuzz: " << line << "\n";
  return backend;
}

int run_fuzz(FuzzOptions o) {
  const ShardChoice shard = choose_shard(o.shard_options);
  o.shard = shard.shard;
  o.report = with_shard_index(o.report, o.shard);
  o.junit = with_shard_index(o.junit, o.shard);
  o.out = with_shard_index(o.out, o.shard);
  check_campaign_options(o);
  check_level_options(o);
  const fuzz::EngineCaseFixed fixed = engine_fixed(o);
  std::unique_ptr<MpsSession> mps;
  const backends::Backend backend = resolve_backend(o, mps);
  if (!shard.source.empty()) std::cout << "fuzz: " << shard_line(shard) << "\n";
  std::vector<model::CoverageLevel> levels;
  if (o.level != "engine") levels.push_back(model::CoverageLevel::kernel);
  if (o.level != "kernel") levels.push_back(model::CoverageLevel::engine);
  const model::CoverageRequirement required = coverage_requirement(o.require_coverage, levels);
  const bool both = o.level == "both";
  // With both levels, a time budget is shared half and half.
  const double seconds =
      o.time_budget.empty() ? 0.0 : parse_duration_option("--time-budget", o.time_budget);
  const double seconds_each = both ? seconds / 2 : seconds;
  int exit_code = kExitOk;
  nlohmann::json report = nlohmann::json::object();
  std::vector<JunitCase> junit;
  const auto add = [&](const char* level, LevelResult r) {
    exit_code = std::max(exit_code, r.exit_code);
    junit.insert(junit.end(), r.junit.begin(), r.junit.end());
    (both ? report[level] : report) = std::move(r.report);
  };
  if (o.level != "engine") add("kernel", run_kernel_level(o, backend, seconds_each, required));
  if (o.level != "kernel" && !model::interrupted())
    add("engine", run_engine_level(o, backend, seconds_each, fixed, required));
  if (o.parallel.mps) print_mps_fault_caveat(report);
  write_json_file("--report", o.report, report);
  if (!o.junit.empty()) write_junit(o.junit, "mambacheck.fuzz", junit);
  if (model::interrupted()) return 128 + model::interrupt_signal();
  return exit_code;
}

// The options of the engine level alone.
void add_engine_options(CLI::App& cmd, FuzzOptions& o) {
  cmd.add_option("--block-size", o.block_size,
                  "Engine level: every case at this mamba block size (default: drawn)");
  cmd.add_option("--token-budget", o.token_budget,
                  "Engine level: every case with this token budget (default: drawn; caps the "
                  "drawn block size)");
  cmd.add_flag("--async", o.async,
                "Engine level: every case with async scheduling, one step in flight (default: "
                "a quarter of the cases)");
  cmd.add_flag("--steer", o.steer,
                "Engine level: steer the generator toward coverage features reached by few or no "
                "cases so far, in epochs of 256 cases (docs/fuzzing.md); not with a shard or "
                "--resume-from");
  cmd.add_option("--steer-epoch", o.steer_epoch,
                  "With --steer: cases per epoch (default 256)");
  cmd.add_option("--steer-boosts", o.steer_boosts,
                  "Engine level: draw every case with these knob boosts (KNOB=rare|missing,...): "
                  "what a steered campaign's reproduce line names");
}

// The options of the kernel level alone.
void add_kernel_options(CLI::App& cmd, FuzzOptions& o) {
  cmd.add_option("--kinds", o.kinds,
                  "Kernel level: draw only these launch kinds (postprocess, postprocess_align, "
                  "precopy, preprocess_align, batch_copy, precopy_v1, "
                  "postprocess_align_slot_tables, precopy_slot_tables)")
      ->delimiter(',');
  cmd.add_option("--focus", o.focus,
                  "Kernel level: a generator preset: default, gpu-grid, big-offsets or races "
                  "(production grids where many programs touch one request)");
}

// What the cases run on, and how a fault in it is contained.
void add_backend_options(CLI::App& cmd, FuzzOptions& o) {
  cmd.add_option("--backend", o.backend, "host or cuda (default: cuda when a GPU is present)");
  cmd.add_option("--mutant", o.mutant,
                  "Run against a mutant (engine level: a runner or kernel mutant)");
  cmd.add_option("--external", o.external,
                  "Kernel level: run the cases on the kernels under test through a worker "
                  "command, e.g. 'python3 -m mambacheck_adapter.worker --kernels MODULE' "
                  "(adapters/python/README.md)");
  cmd.add_option("--external-timeout", o.external_timeout,
                  "Seconds the worker may take to start and for each case (default 300)");
  add_block_manager_options(cmd, o.block_manager, o.block_manager_timeout);
  cmd.add_flag("--no-isolate", o.no_isolate,
                "Run cases one at a time in this process instead of in worker processes (a "
                "kernel that faults then ends the campaign)");
  cmd.add_option("--case-timeout", o.case_timeout,
                  "Seconds one case may take in its worker before it is a finding (default 300)");
}

// How many cases, which, and what is written of them.
void add_campaign_options(CLI::App& cmd, FuzzOptions& o) {
  cmd.add_option("--level", o.level,
                  "kernel (launch cases), engine (scheduler runs, every step) or both");
  cmd.add_option("--seed", o.seed, "Campaign seed (case i uses seed + i; default 1)");
  cmd.add_option("--cases", o.cases,
                  "Stop after N cases (default 2000, or unlimited with "
                  "--time-budget)");
  cmd.add_option("--time-budget", o.time_budget, "Stop after this long: 90s, 15m, 2h");
  cmd.add_option("--max-size", o.max_size, "Largest generator size, 0..100 (default 100)");
  cmd.add_option("--out", o.out, "Directory for counterexamples (default mc-out)");
  cmd.add_option("--report", o.report, "Write a JSON report (deterministic for a seed)");
  cmd.add_option("--junit", o.junit, "Write JUnit XML");
  cmd.add_flag("--keep-going", o.keep_going,
               "Go on after a finding: each new signature is shrunk and saved, repeats counted "
               "(the default under --time-budget)");
  cmd.add_flag("--stop-at-first", o.stop_at_first,
                "Stop at the first finding, also under --time-budget");
  cmd.add_option("--reruns", o.reruns,
                  "Rerun a failing case this many times to classify it (default 5)");
  cmd.add_option("--shrink-time", o.shrink_time,
                  "Stop shrinking a finding after this long (default 60s; none: only the "
                  "candidate count bounds it, so the counterexample is the same on any machine)");
  cmd.add_option("--repeat", o.repeat,
                  "Run every case N times (races show on some schedules only; default 1)");
  cmd.add_option("--resume-from", o.resume_from,
                  "Start at this case index: what an interrupted campaign printed (same seed, "
                  "cases and options; the cases before it are not run again)");
  cmd.add_option("--skip-signature", o.skip_signatures,
                  "A known finding's signature (as printed): counted, not shrunk, not failing "
                  "(repeatable)");
  add_require_coverage_option(cmd, o.require_coverage);
  add_shard_options(cmd, o.shard_options);
  add_parallel_options(cmd, o.parallel_options);
}

void add_fuzz_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<FuzzOptions>();
  CLI::App* cmd = app.add_subcommand("fuzz", "Run a fuzz campaign: oracle vs backend");
  add_campaign_options(*cmd, *o);
  add_backend_options(*cmd, *o);
  add_kernel_options(*cmd, *o);
  add_engine_options(*cmd, *o);
  cmd->callback([o, &action] { action = [o] { return run_fuzz(*o); }; });
}


} // namespace

MC_REGISTER_COMMAND(add_fuzz_command);

} // namespace mc::cli
