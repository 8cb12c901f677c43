// The replay of one trace file as `mambacheck replay` runs it (options, printed summary, report,
// JUnit, --steps-out and --explain), shared with `mambacheck scenario`, which replays the trace
// it expands.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mc::cli {

inline constexpr std::int64_t kNoStep = std::numeric_limits<std::int64_t>::min();

struct ReplayCliOptions {
  std::string trace;
  std::string library;
  std::string backend = "host";
  std::string runner; // empty: the trace's
  std::string v1_copy = "precopy";
  std::string v2_tables = "batch_row";
  bool deferred_postprocess = false;
  bool unordered_writer = false;
  std::string report;
  std::string junit;
  std::vector<std::string> mutants; // --mutant: by name, any level a replay runs
  std::string kernel_mutant = "none"; // --kernel-mutant (hidden), and what --mutant resolves to
  std::string runner_mutant = "none"; // --runner-mutant (hidden), likewise
  std::int64_t steps_max = -1;
  std::int32_t layers = 0;        // 0: the trace's depth; else at most this many per group
  std::string steps_out;          // one JSON line per step (step_view.h)
  std::int64_t explain = kNoStep; // a step to print as a table
  std::optional<std::int64_t> whole_compare_every; // harness/arena_compare.h
  bool reference = false;                          // the oracle's plain structures and byte states
  std::vector<std::string> require_coverage;       // cli/coverage_option.h
  std::string external; // a worker command running the launches (backends/external_engine.h)
  double external_timeout = 300.0;
};

// Exit code as `mambacheck replay` gives it.
int replay_one(const ReplayCliOptions& options);

} // namespace mc::cli
