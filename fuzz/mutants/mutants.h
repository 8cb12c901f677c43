// The mutant catalogue runner: the fuzzer run against one deliberately
// broken variant at a time, with a time budget, to show it is killed (a counterexample is
// found), how fast, and how small the shrunk counterexample is.
//
// Kernel mutants (gpu/mutant.h) are run by the kernel-level campaign
// (fuzz/campaign/kernel_campaign.h) with the backend's kernels of that mutant; engine-level
// entries (runner mutants, kernel mutants through the engine) plug in as MutantJob functions
// of the same shape. A kernel counterexample is one launch, so its size is that launch's
// requests and copies.
#pragma once

#include "fuzz/campaign/kernel_campaign.h"
#include "gpu/mutant.h"
#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mc::fuzz {

// GenOptions::host_default() with big_offset weighted 10 instead of 3.
GenOptions mutant_gen_options();

// A backend that runs a launch with the kernels of a mutant (host or cuda).
using MutantLaunchRunner =
    std::function<model::LaunchResult(const model::LaunchCase&, gpu::Mutant)>;

struct MutantRunOptions {
  std::uint64_t seed = 1;
  double seconds_max = 10.0;  // per mutant: survived when nothing is found by then
  std::int64_t cases_max = 0; // per mutant, 0: no limit but the time
  int max_size = 100;         // kernel level: generator sizes cycle over 0..max_size
  // Kernel level: the campaign's generator, with big-offset arenas drawn more often than in
  // a plain campaign (class B mutants only show past 4 GiB; the default 3 of 100 leaves them
  // to chance within a budget of seconds).
  GenOptions gen = mutant_gen_options();
  std::string backend_name;                         // for reports and reproduce commands
  MutantLaunchRunner backend;                       // kernel level
  std::filesystem::path out_dir = "mc-out/mutants"; // counterexamples under out_dir/NAME/
  ShrinkLimits shrink{.candidates_max = 2000, .seconds_max = 20.0};
};

// What one mutant run found.
struct MutantOutcome {
  std::string name;
  std::string level; // "kernel" or "engine"
  char bug_class = 'X';
  std::string description;
  bool racy = false; // gpu::MutantSchedule::racy: the bug shows only under some schedules
  bool killed = false;
  double seconds_to_kill = 0.0; // until the first failing case (shrinking not counted)
  double seconds = 0.0;         // the whole run, shrinking included
  std::int64_t cases = 0;       // cases run, the failing one included
  std::int64_t steps = 0;       // engine level: steps run; kernel level: launches (= cases)
  // The shrunk counterexample: launches/steps, requests, copies (kernel level: decisions
  // of the oracle on the shrunk launch; engine level: -1 when not counted).
  std::int64_t cx_steps = 0;
  std::int64_t cx_requests = 0;
  std::int64_t cx_copies = 0;
  std::string failure;        // the first difference of the shrunk counterexample
  std::string counterexample; // its file or directory
  std::string picture;        // its report.html, or empty
  std::string reproduce;      // the command that reruns it
};

// One runnable catalogue entry.
struct MutantJob {
  std::string name;
  std::string level;
  char bug_class = 'X';
  std::string description;
  bool racy = false;
  std::function<MutantOutcome(const MutantRunOptions&)> run;
  bool memory_safe = true; // false: it reads or writes outside the case's buffers
};

// Runs the kernel-level campaign against `mutant` (not none) until it is killed or the
// budget is spent. Deterministic in what it finds for a seed (the budget decides only when
// it stops); the counterexample goes under out_dir/NAME/.
MutantOutcome run_kernel_mutant(const MutantRunOptions& options, gpu::Mutant mutant);

// The kernel mutant `info` (a kernel entry of gpu::mutant_catalogue()) as a job.
MutantJob kernel_mutant_job(const gpu::MutantInfo& info);
// Every kernel mutant of the catalogue as a job, in catalogue order.
std::vector<MutantJob> kernel_mutant_jobs();

// Keeps the jobs named in `names` (all when empty); InputError naming an unknown name.
std::vector<MutantJob> select_jobs(std::vector<MutantJob> jobs,
                                   const std::vector<std::string>& names);

// Whether `o` surviving says nothing about the fuzzer: a racy mutant on any backend but host
// (cuda runs the CTAs of a launch concurrently, so a case that can show the race may hold on
// every run the budget allows; host runs one fixed schedule, where it must be killed like
// any other).
bool survival_expected(const MutantOutcome& o, std::string_view backend_name);

// The table: one line per mutant, then killed count and median time to kill.
std::string format_table(const std::vector<MutantOutcome>& outcomes);
double median_seconds_to_kill(const std::vector<MutantOutcome>& outcomes); // killed only; 0 if none

// Report JSON. Timings are included only with `with_timings` (false: deterministic for a seed
// whenever every mutant is killed within its budget).
nlohmann::ordered_json to_json(const MutantRunOptions& options,
                               const std::vector<MutantOutcome>& outcomes, bool with_timings);

} // namespace mc::fuzz
