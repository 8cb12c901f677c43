// The scenario library (scenarios/library/): one small named trace per bug class of
// REFERENCE.md 5, replayed clean by ctest (label scenario) and by the gate.
//
// A scenario is a trace whose header `source` object holds a `scenario` entry:
//   {"name": "...", "bug_class": "A", "guards": "what it guards",
//    "kernel_mutants": ["..."], "runner_mutants": ["..."], "v1_copy_path": "batch_copy"}
// The mutants are those the scenario must catch (gpu/mutant.h, gpu/engine/runner_mutant.h):
// replayed with one of them, the scenario must fail (a mismatch or a finding). Each must be a
// mutant of the catalogue, of the level its list says.
#pragma once

#include "harness/replay.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mc::harness {

struct ScenarioInfo {
  std::filesystem::path path;
  std::string name;
  char bug_class = 'X';
  std::string guards;
  std::vector<std::string> kernel_mutants;
  std::vector<std::string> runner_mutants;
  // The V1 copy path the scenario was recorded with (`v1_copy_path`, default: the caller's).
  std::optional<oracle::engine::V1CopyPath> v1_copy_path;
};

struct LibraryResult {
  ScenarioInfo info;
  ReplayResult clean; // replayed without a mutant: must hold
  struct MutantRun {
    std::string mutant;  // "kernel:NAME" or "runner:NAME"
    bool caught = false; // the replay failed (mismatch or finding)
    std::string summary;
  };
  std::vector<MutantRun> mutants;
  // Why the scenario was not run (kernels in another process that lack a launch kind it
  // needs); empty: it ran.
  std::string skipped;
  bool passed() const; // skipped, or clean held and every mutant caught
};

// The scenarios of `dir` (every *.jsonl), sorted by file name. Throws model::InputError for a
// trace without a valid `source.scenario` entry (a mutant name the catalogue lacks included).
std::vector<ScenarioInfo> list_library(const std::filesystem::path& dir);
ScenarioInfo read_scenario_info(const std::filesystem::path& trace);

// Replays one scenario clean, then with each of its mutants. `options` gives the backend; its
// mutants are ignored. With `options.external` (kernels in another process) only the clean
// replay runs: the mutants are this project's kernels and runner, what the scenario proves it
// catches; and a scenario whose runner launches a kind those kernels do not cover is skipped.
LibraryResult run_scenario(const ScenarioInfo& info, const ReplayOptions& options);
std::vector<LibraryResult> run_library(const std::filesystem::path& dir,
                                       const ReplayOptions& options);

// The library shipped with the binary: installed next to it, else in the source tree it was
// built from (harness/data_dir.h). Throws EnvironmentError naming both places when neither has
// it.
std::filesystem::path default_library_dir();

} // namespace mc::harness
