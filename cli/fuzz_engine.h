// The engine level of `mambacheck fuzz` (fuzz/engine/engine_fuzz.h), called by fuzz_cmd.cpp
// for `--level engine` and `--level both`: progress line, summary, counterexample message.
#pragma once

#include "backends/backend.h"
#include "cli/junit.h"
#include "fuzz/case_workers.h"
#include "fuzz/engine/engine_case.h"
#include "fuzz/findings.h"
#include "fuzz/mutants/mutants.h"
#include "model/coverage.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::cli {

struct EngineLevelRequest {
  backends::Backend backend = backends::Backend::host;
  std::uint64_t seed = 1;
  std::int64_t cases = 0;   // 0: the default (200, or unlimited with a time budget)
  double seconds_max = 0.0; // 0: no time limit
  int max_size = 100;
  fuzz::EngineCaseFixed fixed;
  std::string mutant; // a runner mutant or kernel mutant name; empty: none
  std::string out = "mc-out";
  bool keep_going = false;
  int reruns = fuzz::kRerunsDefault;
  double shrink_seconds = 60.0; // 0: the candidate count is the only bound (--shrink-time none)
  int repeat = 1;
  std::vector<std::string> skip_signatures;
  bool isolate = false; // host: the reruns and shrink candidates of a finding in forked children
  double case_timeout = 300.0;
  std::int64_t first_case = 0; // --resume-from
  std::int64_t steer_epoch = 0; // --steer (its epoch), 0: off
  fuzz::Shard shard;           // --shard, or the scheduler's
  int jobs = 1;                // cases at once, in `workers`
  std::optional<fuzz::CaseWorkerStart> workers; // where the cases run; absent: in this process
  model::CoverageRequirement required_coverage; // a required feature never reached: exit 1
  // --external: a worker command running every launch (backends/external_engine.h): one
  // adapter for this process (a finding's reruns and shrinking) and one per case worker, their
  // stderr under OUT/external/.
  std::string external;
  double external_timeout = 300.0;
};

struct EngineLevelResult {
  int exit_code = 0;
  nlohmann::ordered_json report;
  std::vector<JunitCase> junit; // one per signature, or one passing case
};

EngineLevelResult run_engine_level(const EngineLevelRequest& request);

// The runner or scheduler mutant `info` (an entry of gpu::mutant_catalogue() above the kernel
// level) as a `mutants` job: the engine-level fuzz against it.
fuzz::MutantJob runner_mutant_job(const gpu::MutantInfo& info);

} // namespace mc::cli
