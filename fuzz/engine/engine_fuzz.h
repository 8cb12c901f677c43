// The engine-level fuzz campaign: generated engine cases (engine_case.h) run on the
// oracle engine and the GPU-side runner, every step compared (launches, decisions, arrays,
// every arena byte) and every oracle invariant checked. A failing case is rerun, classified
// and given a signature (fuzz/findings.h). The first case of each new signature is shrunk by a
// bounded shrinker of its own (fewer requests, steps cut after the failing one, shorter
// prompts and outputs, fewer drafts, smaller budget and pool, fewer layers and groups, simpler
// options; a candidate is kept only if it fails with the same signature, and the case saved
// must fail on at least half of its reruns) and written, before and after shrinking, as
// traces (scenarios/FORMAT.md) with report.json and report.txt naming the first difference
// and the command that reproduces it. The campaign stops at its first finding, or with
// keep_going counts every later one and goes on.
//
// Case i uses case seed `seed + i` at size `case seed % (max_size + 1)`, so
// `--seed <case seed> --cases 1` reruns exactly one case. No timing goes into the report:
// the same options give the same JSON.
#pragma once

#include "fuzz/case_workers.h"
#include "fuzz/engine/engine_case.h"
#include "fuzz/findings.h"
#include "fuzz/shard.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mc::fuzz {

struct EngineFinding;

struct EngineShrinkLimits {
  std::int32_t candidates_max = 2000; // candidate runs tried
  // Wall time, a safety net for the candidate limit; 0: none (the shrink is then the same on
  // any machine).
  double seconds_max = 60.0;
};

struct EngineFuzzOptions {
  std::uint64_t seed = 1;
  std::int64_t cases_max = 200; // stop after this many cases...
  std::int64_t first_case = 0;  // the index of the first case run (a resumed campaign)
  Shard shard;                  // runs the cases of this shard only (fuzz/shard.h)
  // Cases run at once, each in a case worker (`workers`). Outcomes are taken in case order, so
  // the report is the same for any number of jobs.
  int jobs = 1;
  // Where the cases run: in `jobs` case workers started so (fuzz/case_workers.h: the command
  // fills in the program and each worker's environment; the campaign adds its options), or,
  // when absent, one at a time in this process (forked children where `isolate` says so).
  std::optional<CaseWorkerStart> workers;
  double seconds_max = 0.0;     // ...or after this long (0: no time limit)
  int max_size = kEngineSizeMax;
  EngineCaseFixed fixed;
  // Steering (fuzz/engine/steer.h): epochs of this many cases, each drawn with the boosts the
  // cases of the epochs before it give; 0: off. Not with a shard or a resumed campaign (the
  // counts of cases it does not run would decide its draws).
  std::int64_t steer_epoch = 0;
  gpu::engine::ExecutorKind executor = gpu::engine::ExecutorKind::host;
  gpu::Mutant kernel_mutant = gpu::Mutant::none;
  gpu::engine::RunnerMutant runner_mutant = gpu::engine::RunnerMutant::none;
  harness::SchedulerMutant scheduler_mutant = harness::SchedulerMutant::none;
  std::string backend_name = "host";        // for the reproduce command
  // When set, the launches of every run in this process (a finding's reruns and shrink
  // candidates, the cases themselves without workers) go to its kernels (an external worker's,
  // not owned; the adapter is a process of its own, so no forked isolation), and
  // `backend_args` names the backend in the reproduce and replay commands (`--external
  // 'COMMAND'`) instead of `--backend NAME`. Case workers then start adapters of their own
  // from the setup's backend (cli/case_worker_cmd.cpp).
  gpu::engine::ExecutorSource* external = nullptr;
  std::string backend_args;
  std::filesystem::path out_dir = "mc-out"; // counterexamples go here; empty: write nothing
  EngineShrinkLimits shrink;
  // Every run in this process (a finding's reruns and shrink candidates, and the cases
  // themselves without workers) in a forked child (host executor only): a kernel that faults
  // is a finding.
  bool isolate = false;
  // A case in a worker, or an isolated run, running longer is a finding (0: no limit).
  double case_timeout_seconds = 0.0;
  bool keep_going = false;     // go on after a finding (repeats of a signature only count)
  int reruns = kRerunsDefault; // reruns of a failing case before it is reported
  int repeat = 1;              // runs of every case
  std::vector<std::string> skip_signatures; // known findings: counted, not shrunk, not failing
  std::function<void(std::int64_t cases, std::int64_t steps, const std::string& preset)> on_case;
  std::function<void(const EngineFinding&)> on_finding; // a new signature, shrunk
};

struct EngineCounterexample {
  std::uint64_t case_seed = 0;
  int size = 0;
  std::string failure_kind; // harness::Difference::kind
  std::string failure;      // the first difference of the shrunk case, one line
  harness::Difference difference;
  std::string original_failure;
  std::int64_t original_steps = 0, original_requests = 0;
  std::int64_t steps = 0, requests = 0; // of the shrunk case
  std::int32_t shrink_steps = 0;        // accepted shrinks
  std::int32_t shrink_tried = 0;        // candidates run
  EngineCase shrunk;
  std::string description; // describe(shrunk)
  std::filesystem::path dir, original_trace, shrunk_trace;
  std::filesystem::path steps_view; // the shrunk trace's steps as the oracle saw them, or empty
  std::string reproduce;            // mambacheck fuzz --level engine ... (reruns the failing case)
  std::string replay;               // mambacheck replay TRACE ... (the shrunk trace)
  RunTally saved_runs;              // reruns of the saved (shrunk) case
  bool shrink_kept = true; // false: no smaller case reproduced, the original is saved
  bool shrink_timed_out = false; // the shrink's time bound stopped it (a rerun may go further)
  std::string signature;            // of the shrunk case's failure
  std::filesystem::path picture;    // dir/report.html, or empty when it was not written
};

// One signature of a campaign: its first case, rerun and shrunk, and how often it recurred.
struct EngineFinding {
  Signature signature;
  std::uint64_t first_case_seed = 0;
  int first_size = 0;
  std::int64_t cases = 0; // failing cases with this signature's key
  bool skipped = false;   // named by --skip-signature: counted, neither shrunk nor failing
  std::string failure;    // of the first case
  RunTally runs;          // the first case: its run and reruns
  std::optional<EngineCounterexample> counterexample; // absent when skipped
};

// The signature of a failing engine case: the launch kind (or the oracle check) that failed,
// the kind of difference, and the runner flavour as its shape.
Signature engine_signature(const EngineCase& c, const harness::Difference& difference);

struct EngineFuzzReport {
  std::int64_t cases = 0;
  std::int64_t steps = 0;
  std::int64_t bytes_compared = 0;
  std::map<std::string, std::int64_t> cases_by_preset;
  // v1 precopy, v1 precopy_v1, v1 batch_copy, v2, v2 slot-tables (deferred), all
  std::map<std::string, std::int64_t> cases_by_runner;
  std::map<std::string, std::int64_t> cases_by_scheduling; // sync, async
  // Every case's first run (not reruns, repeats or shrink candidates): model/coverage.h.
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  double seconds = 0.0;                                // shrinking and files included
  double seconds_to_failure = 0.0; // until the first failing case ran (shrinking not counted)
  std::vector<EngineFinding> findings; // in the order their first cases came
  std::string stopped; // why the campaign stopped before its cases or budget ran out, if it did
  int interrupted = 0;   // the signal that stopped it between two cases (model/interrupt.h)
  std::int64_t next_case = 0; // the index of the first case not run: where a resume starts
  // A steered campaign: the epochs it started whose boosts were not all none, in order.
  struct SteerEpoch {
    std::int64_t first_case = 0;
    SteerBoosts boosts;
  };
  std::vector<SteerEpoch> steer_epochs;
  // A steered campaign: the index of the first case that reached each feature it reached.
  std::map<std::string, std::int64_t> steer_first_reached;
  std::int64_t steer_barriers = 0;    // epoch starts that waited for the epoch before to end
  double steer_stall_seconds = 0.0;   // how long they waited (not in the JSON: a timing)

  const EngineFinding* first_failing() const; // the first finding not skipped, or null
  std::int64_t failing_cases() const;          // skipped signatures too
};

EngineFuzzReport run_engine_fuzz(const EngineFuzzOptions& options);

// A case worker's side of an engine campaign: case `index` generated from the setup the
// campaign sent (seed, sizes, fixed sizes, executor and mutants, repeats) as the campaign does,
// run up to `repeat` times (stopping at the first that fails), each step it starts reported as
// its progress, its outcome as the payload.
// With `external` (an adapter worker of this case worker's own, not owned), every run's launches
// go to its kernels.
CaseWorkerJob engine_case_job(const nlohmann::json& setup,
                              gpu::engine::ExecutorSource* external = nullptr);

struct ShrinkResult {
  EngineCase best;
  EngineOutcome outcome; // of best: fails with the input's signature
  std::int32_t accepted = 0;
  std::int32_t tried = 0;
  bool timed_out = false; // limits.seconds_max stopped it (a rerun may shrink further)
  std::vector<std::pair<EngineCase, EngineOutcome>> chain; // accepted candidates, in order
};

// Shrinks a failing case (`outcome` its failure) within `limits`. A candidate is accepted when
// it fails with the input's signature key in one of `runs_per_candidate` runs (fuzz/findings.h,
// candidate_runs); never returns a case that did not fail so.
ShrinkResult shrink_engine_case(const EngineCase& failing, const EngineOutcome& outcome,
                                const EngineRunOptions& run, const EngineShrinkLimits& limits,
                                int runs_per_candidate = 1);

// Deterministic for the options: no timings.
nlohmann::ordered_json to_json(const EngineFuzzOptions& options, const EngineFuzzReport& report);

} // namespace mc::fuzz
