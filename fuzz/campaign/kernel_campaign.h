// A kernel-level fuzz campaign: generated launch cases run on the oracle and on a backend,
// compared exactly. A failing case is rerun and classified, and gets a signature
// (fuzz/findings.h); the first case of each new signature is shrunk (bounded in steps and
// time, never to a case that does not reproduce) and written, before and after shrinking, as
// replayable case directories (model/CASE_FORMAT.md) with a report naming the first
// difference (DESIGN.md, "Counterexamples"). The campaign stops at its first finding, or
// with keep_going counts every later one and goes on.
//
// Case i draws from seed + i at a size that cycles over 0..max_size, so a campaign mixes
// tiny cases with production-like grids from the start; the same seed gives the same cases,
// the same failure and the same report.
#pragma once

#include "fuzz/case_workers.h"
#include "fuzz/compare.h"
#include "fuzz/findings.h"
#include "fuzz/gen_launch.h"
#include "fuzz/isolate.h"
#include "fuzz/run_case.h"
#include "fuzz/shard.h"
#include "model/coverage.h"
#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mc::fuzz {

struct KernelFinding;

struct ShrinkLimits {
  std::int32_t candidates_max = 4000; // shrink candidates tried
  double seconds_max = 60.0; // 0: no time bound (the shrink is then the same on any machine)
};

struct KernelCampaignOptions {
  std::uint64_t seed = 1;
  std::int64_t cases_max = 1000; // stop after this many cases...
  std::int64_t first_case = 0;   // the index of the first case run (a resumed campaign)
  Shard shard;                   // runs the cases of this shard only (fuzz/shard.h)
  // Cases run at once, each in a case worker (`workers`). Verdicts are taken in case order, so
  // the report is the same for any number of jobs.
  int jobs = 1;
  // Where the cases run: in `jobs` case workers started so (fuzz/case_workers.h; the command
  // fills in the program, each worker's environment and, under setup["backend"], how a worker
  // makes its backend; the campaign adds its own options), or, when absent, one at a time in
  // this process (forked children where `isolate` says so).
  std::optional<CaseWorkerStart> workers;
  double seconds_max = 0.0;      // ...or after this long (0: no time limit)
  int max_size = 100;            // generator size parameter, 0..100
  GenOptions gen = GenOptions::host_default();
  std::string backend_name; // for reports and the reproduce command
  LaunchRunner backend;
  std::string mutant_name; // the kernel mutant `backend` runs (--mutant); empty: the clean kernels
  std::filesystem::path out_dir = "mc-out"; // counterexamples go here
  ShrinkLimits shrink;
  bool keep_going = false;     // go on after a finding (repeats of a signature only count)
  int reruns = kRerunsDefault; // reruns of a failing case before it is reported
  int repeat = 1;              // runs of every case (a race shows on some schedules only)
  std::vector<std::string> skip_signatures; // known findings: counted, not shrunk, not failing
  // Every run in this process (a finding's reruns and shrink candidates, and the cases
  // themselves without workers) in a forked child (fuzz/isolate.h), so a kernel that reads or
  // writes out of bounds is a finding, not the end of the campaign. Only for backends that run
  // in this process without threads or a device context: the host backend.
  bool isolate = false;
  // A case in a worker, or an isolated run, taking longer is a finding (0: no limit).
  double case_timeout_seconds = 0.0;
  // When a run ends in a device fault (the process's CUDA context is lost): a runner for every
  // later run, in a process of its own (`mambacheck worker`). Empty: the campaign stops there.
  std::function<LaunchRunner()> replace_backend;
  std::function<void(std::int64_t cases, model::LaunchKind, SizeClass)> on_case; // progress
  std::function<void(const KernelFinding&)> on_finding; // a new signature, rerun and shrunk
};

// What the campaign keeps of one run of a case (run_case.h); the results themselves are
// dropped at once: a big-offset case holds gigabytes of arenas, and a failing case's verdict
// is kept through the whole shrink.
struct CaseVerdict {
  std::optional<std::string> failure; // the first difference, or the backend's error
  std::optional<Difference> difference;
  std::optional<std::int32_t> row; // the batch row the difference belongs to, when one does
  bool rejected = false;           // the oracle called the case invalid: never a shrink result
  bool backend_error = false;      // the backend threw (or crashed)
  bool device_lost = false;        // it threw model::DeviceFault: no more runs in this process
  Signature signature;             // when it failed; classification from this run alone
  std::vector<std::string> pairs;  // every differing (row, state) and array entry (a mismatch)
  std::int64_t copies = 0;         // the oracle's decisions, when the backend returned
  std::int64_t arena_bytes = 0;    // compared, when the backend returned
  // What the launch exercised, from the oracle's result (model/coverage.h); empty when the
  // oracle rejected the case or the run crashed.
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::kernel);
};

// Runs `spec` once: materialize, oracle, backend, compare.
CaseVerdict judge_case(const LaunchSpec& spec, const LaunchRunner& backend);
// What the campaign keeps of a run of `launch` (the second half of judge_case).
CaseVerdict verdict_of(const model::LaunchCase& launch, const CaseOutcome& outcome);

// The same in a forked child: a crash or a timeout of the backend is a verdict too (a
// backend error whose signature's difference is "crash" or "timeout", its shape the buffer
// the faulting address lies in or next to).
CaseVerdict judge_case_isolated(const LaunchSpec& spec, const LaunchRunner& backend,
                                double timeout_seconds);

// The verdict of a case from how the process that ran it ended: the payload's verdict, or a
// crash or timeout.
CaseVerdict isolated_verdict(model::LaunchKind kind, const IsolatedOutcome& outcome);

// A case worker's side of a kernel campaign: case `index` drawn from the setup the campaign sent
// (its seed, sizes, generator options and repeats) as the campaign draws it, run on `backend` up
// to `repeat` times (stopping at the first that fails), its verdict as the payload.
CaseWorkerJob kernel_case_job(const nlohmann::json& setup, LaunchRunner backend);

// A verdict as it travels from an isolated child process back to the campaign.
nlohmann::json to_json(const CaseVerdict& verdict);
CaseVerdict verdict_from_json(const nlohmann::json& j);

struct Counterexample {
  std::uint64_t case_seed = 0;
  int size = 0;
  std::string failure; // the first difference, or the exception of a backend
  std::optional<Difference> difference;
  std::string description;       // fuzz::describe of the shrunk spec
  std::int32_t requests = 0;     // batch rows of the shrunk launch
  std::int64_t copies = 0;       // the oracle's copy decisions on the shrunk launch
  std::int32_t shrink_steps = 0; // accepted shrinks
  std::int32_t shrink_tried = 0; // candidates tried
  RunTally saved_runs;           // reruns of the saved (shrunk) case
  bool shrink_kept = true;       // false: no smaller case reproduced, the original is saved
  bool shrink_timed_out = false; // the shrink's time bound stopped it (a rerun may go further)
  std::filesystem::path original_dir;
  std::filesystem::path shrunk_dir;
  std::filesystem::path picture; // shrunk_dir/report.html; empty when it was not written
};

// One signature of a campaign: its first case, rerun and shrunk, and how often it recurred.
struct KernelFinding {
  Signature signature;
  std::uint64_t first_case_seed = 0;
  int first_size = 0;
  std::int64_t cases = 0; // failing cases with this signature's key
  bool skipped = false;   // named by --skip-signature: counted, neither shrunk nor failing
  std::string failure;    // of the first case
  RunTally runs;          // the first case: its run and reruns
  std::vector<std::string> rows_in_runs; // nondeterministic: what failed in each run
  std::optional<Counterexample> counterexample; // absent when skipped
};

struct KernelCampaignReport {
  std::int64_t cases = 0;
  std::map<std::string, std::int64_t> cases_by_kind;
  std::map<std::string, std::int64_t> cases_by_size_class;
  std::int64_t copies_compared = 0;
  std::int64_t arena_bytes_compared = 0;
  // Every case's first run (not its reruns, repeats or shrink candidates).
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::kernel);
  double seconds = 0.0;
  double seconds_to_failure = 0.0; // until the first failing case was found (no shrinking)
  std::vector<KernelFinding> findings; // in the order their first cases came
  std::string stopped; // why the campaign stopped before its cases or budget ran out, if it did
  std::string backend_replaced; // why later cases ran on a replacement backend, if they did
  int interrupted = 0;   // the signal that stopped it between two cases (model/interrupt.h)
  std::int64_t next_case = 0; // the index of the first case not run: where a resume starts

  // The first finding not skipped, or null.
  const KernelFinding* first_failing() const;
  std::int64_t failing_cases() const; // every case that failed, skipped signatures too
};

KernelCampaignReport run_kernel_campaign(const KernelCampaignOptions& options);

// Deterministic for a seed: holds no timings (those go to the terminal); failure rates, which
// reruns measure, sit apart under "measured".
nlohmann::json to_json(const KernelCampaignOptions& options, const KernelCampaignReport& report);

} // namespace mc::fuzz
