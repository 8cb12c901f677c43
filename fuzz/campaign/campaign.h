// One fuzz campaign, whatever its level: cases drawn from seed + index, run in this process or
// in case workers (`jobs` at a time, verdicts taken in case order so the report is the same for
// any number of jobs), the first case of each new signature rerun, classified, shrunk and saved
// by its level, later ones counted; stopped by its case count, its time budget, an interrupt
// (model/interrupt.h), its first finding unless it keeps going, or a device fault that leaves no
// process to run in. A shard runs every N-th case; a resumed campaign starts at `first_case`.
//
// The two levels (fuzz/campaign/kernel_campaign.h, fuzz/engine/engine_fuzz.h) implement
// CampaignLevel: how a case is drawn, run and counted, and what a finding saves. Everything
// else, and the report's common fields, is written here once.
#pragma once

#include "fuzz/case_workers.h"
#include "fuzz/findings.h"
#include "fuzz/shard.h"
#include "model/coverage.h"

#include <nlohmann/json.hpp>

#include <any>
#include <initializer_list>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mc::fuzz {

struct Finding;

// The version of the JSON report `to_json` writes. Reports without a version field are
// version 1 (kernel and engine reports had drifted apart then): `upgrade_report` reads them.
inline constexpr int kReportVersion = 2;

struct ShrinkLimits {
  std::int32_t candidates_max = 4000; // shrink candidates tried (2000 at the engine level)
  double seconds_max = 60.0; // 0: no time bound (the shrink is then the same on any machine)
};

// What every campaign has, whatever its level. A level's own options live beside it (its
// CampaignLevel implementation takes them).
struct CampaignOptions {
  std::uint64_t seed = 1;
  std::int64_t cases_max = 1000; // stop after this many cases...
  double seconds_max = 0.0;      // ...or after this long (0: no time limit)
  std::int64_t first_case = 0;   // the index of the first case run (a resumed campaign)
  Shard shard;                   // runs the cases of this shard only (fuzz/shard.h)
  int max_size = 100;            // generator size parameter
  // Cases run at once, each in a case worker started so (fuzz/case_workers.h: the command
  // fills in the program, each worker's environment and, under setup["backend"], how a worker
  // makes its backend; the campaign adds the rest of its setup). Absent: one at a time in this
  // process.
  int jobs = 1;
  std::optional<CaseWorkerStart> workers;
  std::string backend_name; // host, cuda or external: for reports
  // How reproduce lines name the backend: `--backend NAME [--mutant M]` or `--external 'CMD'`.
  std::string backend_args;
  std::string external; // the --external worker command, when the kernels under test are one
  std::string mutant;   // the mutant the backend runs (--mutant); empty: the clean code
  std::filesystem::path out_dir = "mc-out"; // counterexamples go here; empty: write nothing
  ShrinkLimits shrink;
  bool keep_going = false;     // go on after a finding (repeats of a signature only count)
  int reruns = kRerunsDefault; // reruns of a failing case before it is reported
  int repeat = 1;              // runs of every case (a race shows on some schedules only)
  std::vector<std::string> skip_signatures; // known findings: counted, not shrunk, not failing
  // Every run in this process (a finding's reruns and shrink candidates, and the cases
  // themselves without workers) in a forked child (fuzz/isolate.h), so a kernel that reads or
  // writes out of bounds is a finding, not the end of the campaign. Host backend only.
  bool isolate = false;
  // A case in a worker, or an isolated run, taking longer is a finding (0: no limit).
  double case_timeout_seconds = 0.0;
  // Progress: the cases counted so far and what the last one was ("precopy tiny", "52 steps,
  // tiny-mamba2").
  std::function<void(std::int64_t cases, const std::string& what)> on_case;
  std::function<void(const Finding&)> on_finding; // a new signature, rerun and shrunk
};

// A case of a campaign.
struct CaseRef {
  std::int64_t index = 0;
  std::uint64_t case_seed = 0; // seed + index
  int size = 0;
};

// What the runner needs of a case's result; the level keeps the rest in `detail`.
struct CaseResult {
  std::optional<std::string> failure; // the first difference, or why the run failed
  Signature signature;                // when it failed
  std::any detail;
};

// The saved counterexample of a finding, as its level wrote it.
struct KernelCounterexample;
struct EngineCounterexample;

// One signature of a campaign: its first case, rerun and shrunk, and how often it recurred.
struct Finding {
  Signature signature;
  std::uint64_t first_case_seed = 0;
  int first_size = 0;
  std::int64_t cases = 0; // failing cases with this signature's key
  bool skipped = false;   // named by --skip-signature: counted, neither shrunk nor failing
  std::string failure;    // of the first case
  RunTally runs;          // the first case: its run and reruns
  // Nondeterministic kernel findings: what each run of the first case saw.
  std::vector<std::string> rows_in_runs;
  // The level's counterexample (absent when skipped): a KernelCounterexample or an
  // EngineCounterexample.
  std::any counterexample;
  // Its fields in the report's finding entry, and in the "measured" rates.
  nlohmann::json counterexample_json;
  std::string description;                  // the saved case, in words
  std::string reproduce;                    // the command that reruns the saved case
  std::filesystem::path counterexample_dir; // where it was saved
  RunTally saved_runs; // reruns of the saved case (when there is one)

  bool saved() const { return counterexample.has_value(); }
  template <class T> const T* counterexample_as() const {
    return std::any_cast<T>(&counterexample);
  }
};

struct CampaignReport {
  std::string level; // "kernel" or "engine"
  std::int64_t cases = 0;
  // Counts of the cases by what they were: kernel "kind" and "size_class"; engine "preset",
  // "runner" and "scheduling".
  std::map<std::string, std::map<std::string, std::int64_t>> cases_by;
  // Sums over the cases: kernel copies_compared and arena_bytes_compared; engine steps and
  // bytes_compared.
  std::map<std::string, std::int64_t> totals;
  // Every case's first run (not its reruns, repeats or shrink candidates).
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::kernel);
  double seconds = 0.0;
  double seconds_to_failure = 0.0; // until the first failing case was found (no shrinking)
  std::vector<Finding> findings;   // in the order their first cases came
  std::string stopped; // why the campaign stopped before its cases or budget ran out, if it did
  std::string backend_replaced; // why later runs went to a replacement backend, if they did
  int interrupted = 0;          // the signal that stopped it between two cases
  std::int64_t next_case = 0;   // the index of the first case not run: where a resume starts

  std::int64_t total(const std::string& name) const;
  const Finding* first_failing() const; // the first finding not skipped, or null
  std::int64_t failing_cases() const;   // every case that failed, skipped signatures too
};

// Before a case starts: whether it waits for the cases in flight to end (a steered campaign's
// epoch boundary), and whether the workers must be started afresh with the level's new setup.
struct StartGate {
  bool wait = false;
  bool new_setup = false;
};

class CampaignLevel {
public:
  virtual ~CampaignLevel() = default;
  virtual std::string name() const = 0; // "kernel", "engine"
  virtual model::CoverageLevel coverage_level() const = 0;
  // The generator size of case `index` (seed + index).
  virtual int size_of(std::int64_t index, std::uint64_t case_seed) const = 0;
  // What a case worker needs to draw and run a case as this process does (the runner adds the
  // seed, sizes and repeats).
  virtual nlohmann::json worker_setup() const = 0;
  // Runs case `c` in this process, up to `repeat` times (stopping at the first that fails).
  virtual CaseResult run_here(const CaseRef& c) = 0;
  // Case `c`'s result from how its worker ended.
  virtual CaseResult from_worker(const CaseRef& c, const IsolatedOutcome& outcome) = 0;
  // Counts a result into `report` (totals, counts by, coverage); returns the progress text.
  virtual std::string count(const CaseRef& c, const CaseResult& result,
                            CampaignReport& report) = 0;
  // The first case of a new signature (`f`, as the runner made it from the result): reran,
  // classified, shrunk and saved.
  virtual void record(const CaseRef& c, const CaseResult& result, Finding& f,
                      CampaignReport& report) = 0;
  // After a failure: whether nothing more can run in this process (its CUDA context is lost
  // and nothing replaced it).
  virtual bool device_lost(const CaseResult& result) const = 0;
  virtual StartGate before_start(std::int64_t next, bool nothing_in_flight,
                                 CampaignReport& report) = 0;
  // The level's fields of the report: its totals and counts by, its options (what decides the
  // cases drawn, so `merge` can refuse parts of different campaigns) and its own results.
  virtual void report_json(const CampaignReport& report, nlohmann::json& j) const = 0;
};

CampaignReport run_campaign(const CampaignOptions& options, CampaignLevel& level);

// A level's totals and counts by (CampaignReport) as report fields: `total` and `cases_by_BY`,
// zero or empty where no case counted one.
void write_counts(const CampaignReport& report, std::initializer_list<const char*> totals,
                  std::initializer_list<const char*> counts_by, nlohmann::json& j);

// The options that decide a campaign's cases and what it makes of them, as the report states
// them and as its case workers receive them (the runner sends them under setup["campaign"]):
// one writer and one reader, so an option added here reaches both. Not the process-local ones
// (jobs, workers, isolation, timeouts, the output folder, callbacks).
nlohmann::json options_json(const CampaignOptions& options);
CampaignOptions campaign_options_from_json(const nlohmann::json& j);

// Deterministic for the options: no timings (those go to the terminal); failure rates, which
// reruns measure, sit apart under "measured".
nlohmann::json to_json(const CampaignOptions& options, const CampaignLevel& level,
                               const CampaignReport& report);

// A report of one level as the current version has it: version-1 reports (no "version"
// field: kernel ones said "result": "held" or "mismatch"; engine ones named their runner,
// kernel and scheduler mutants apart, their findings had no "features" and their replay lines
// said --runner-mutant or --kernel-mutant where they now say --mutant) are mapped field by field; a current one is returned as it is. Both levels' reports ("kernel", "engine") are
// each upgraded.
nlohmann::json upgrade_report(nlohmann::json report);

} // namespace mc::fuzz
