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

#include "fuzz/campaign/campaign.h"
#include "fuzz/case_workers.h"
#include "fuzz/compare.h"
#include "fuzz/findings.h"
#include "fuzz/gen_launch.h"
#include "fuzz/isolate.h"
#include "fuzz/run_case.h"
#include "model/coverage.h"
#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mc::fuzz {

// The kernel level's own options; the campaign's are CampaignOptions.
struct KernelLevelOptions {
  GenOptions gen = GenOptions::host_default();
  LaunchRunner backend;
  std::string focus; // the generator preset gen came from (--focus), for the report
  // When a run ends in a device fault (the process's CUDA context is lost): a runner for every
  // later run, in a process of its own (`mambacheck worker`). Empty: the campaign stops there.
  std::function<LaunchRunner()> replace_backend;
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

// A case worker's side of a kernel campaign: case `index` drawn from the setup the campaign sent
// (its seed, sizes, generator options and repeats) as the campaign draws it, run on `backend` up
// to `repeat` times (stopping at the first that fails), its verdict as the payload.
CaseWorkerJob kernel_case_job(const nlohmann::json& setup, LaunchRunner backend);

// A verdict as it travels from an isolated child process back to the campaign.
nlohmann::json to_json(const CaseVerdict& verdict);
CaseVerdict verdict_from_json(const nlohmann::json& j);

struct KernelCounterexample {
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

// The kernel level of a campaign (fuzz/campaign/campaign.h): launch cases drawn by
// gen_launch_spec, judged by the oracle against `backend`.
class KernelLevel final : public CampaignLevel {
public:
  KernelLevel(const CampaignOptions& campaign, KernelLevelOptions options);
  ~KernelLevel() override;

  std::string name() const override { return "kernel"; }
  model::CoverageLevel coverage_level() const override { return model::CoverageLevel::kernel; }
  int size_of(std::int64_t index, std::uint64_t case_seed) const override;
  nlohmann::json worker_setup() const override;
  CaseResult run_here(const CaseRef& c) override;
  CaseResult from_worker(const CaseRef& c, const IsolatedOutcome& outcome) override;
  std::string count(const CaseRef& c, const CaseResult& result, CampaignReport& report) override;
  void record(const CaseRef& c, const CaseResult& result, Finding& f,
              CampaignReport& report) override;
  bool device_lost(const CaseResult& result) const override;
  StartGate before_start(std::int64_t, bool, CampaignReport&) override { return {}; }
  void report_json(const CampaignReport& report, nlohmann::json& j) const override;

private:
  struct State;
  std::unique_ptr<State> state_;
};

// A kernel campaign, run: the level made from `options`.
CampaignReport run_kernel_campaign(const CampaignOptions& campaign,
                                   const KernelLevelOptions& options);

} // namespace mc::fuzz
