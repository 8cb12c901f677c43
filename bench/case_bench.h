// Where the time of a kernel campaign's case goes, one case after another in this process
// (`mambacheck bench --cases N`): drawing the spec, the layout and arenas (mapped and
// poisoned), the seeded fill of referenced blocks, the oracle, the backend under test, the
// comparison, the verdict (signature, coverage), its trip to the campaign as JSON (what a case
// worker sends), and the release of the case's memory. With the process's user and system CPU
// time, since mapping and faulting in arena pages is system time.
#pragma once

#include "fuzz/gen_launch.h"
#include "fuzz/run_case.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace mc::bench {

struct CaseBenchOptions {
  std::uint64_t seed = 1;
  std::int64_t cases = 500;
  int max_size = 30;
  fuzz::GenOptions gen = fuzz::GenOptions::host_default();
  fuzz::LaunchRunner backend;
  std::string backend_name;
};

// Seconds spent in each phase, over all cases.
struct CasePhases {
  double draw = 0, arenas = 0, fill = 0, oracle = 0, backend = 0, compare = 0, verdict = 0, ipc = 0,
         release = 0;
};

struct CaseBenchResult {
  std::int64_t cases = 0;
  std::int64_t failed = 0; // cases whose verdict was a failure (a mutant, or a bug)
  std::int64_t arena_bytes = 0;
  CasePhases phases;
  double wall_seconds = 0, user_seconds = 0, system_seconds = 0;
};

CaseBenchResult run_case_bench(const CaseBenchOptions& options);

// A table: each phase's total, per case and share of the wall time.
std::string describe(const CaseBenchOptions& options, const CaseBenchResult& result);
nlohmann::json to_json(const CaseBenchOptions& options, const CaseBenchResult& result);

} // namespace mc::bench
