// The engine-level fuzz campaign: generated engine cases (engine_case.h) run on the
// oracle engine and the GPU-side runner, every step compared (launches, decisions, arrays,
// every arena byte) and every oracle invariant checked. The first failing case is shrunk by a
// bounded shrinker of its own (fewer requests, steps cut after the failing one, shorter
// prompts and outputs, fewer drafts, smaller budget and pool, fewer layers and groups, simpler
// options; a candidate is kept only if it fails the same kind of way) and written, before and
// after shrinking, as traces (scenarios/FORMAT.md) with report.json and report.txt naming the
// first difference and the command that reproduces it.
//
// Case i uses case seed `seed + i` at size `case seed % (max_size + 1)`, so
// `--seed <case seed> --cases 1` reruns exactly one case. No timing goes into the report:
// the same options give the same JSON.
#pragma once

#include "fuzz/engine/engine_case.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace mc::fuzz {

struct EngineShrinkLimits {
  std::int32_t candidates_max = 2000; // candidate runs tried
  double seconds_max = 60.0;          // wall time (a safety net: the candidate limit binds first)
};

struct EngineFuzzOptions {
  std::uint64_t seed = 1;
  std::int64_t cases_max = 200; // stop after this many cases...
  double seconds_max = 0.0;     // ...or after this long (0: no time limit)
  int max_size = kEngineSizeMax;
  EngineCaseFixed fixed;
  gpu::engine::ExecutorKind executor = gpu::engine::ExecutorKind::host;
  gpu::Mutant kernel_mutant = gpu::Mutant::none;
  gpu::engine::RunnerMutant runner_mutant = gpu::engine::RunnerMutant::none;
  std::string backend_name = "host";        // for the reproduce command
  std::filesystem::path out_dir = "mc-out"; // counterexamples go here; empty: write nothing
  EngineShrinkLimits shrink;
  std::function<void(std::int64_t cases, std::int64_t steps, const EngineCase&)> on_case;
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
};

struct EngineFuzzReport {
  std::int64_t cases = 0;
  std::int64_t steps = 0;
  std::int64_t bytes_compared = 0;
  std::map<std::string, std::int64_t> cases_by_preset;
  std::map<std::string, std::int64_t> cases_by_runner; // v1 precopy, v1 batch_copy, v2, all
  double seconds = 0.0;                                // shrinking and files included
  double seconds_to_failure = 0.0; // until the first failing case ran (shrinking not counted)
  std::optional<EngineCounterexample> counterexample;
};

EngineFuzzReport run_engine_fuzz(const EngineFuzzOptions& options);

struct ShrinkResult {
  EngineCase best;
  EngineOutcome outcome; // of best: fails with the same kind as the input
  std::int32_t accepted = 0;
  std::int32_t tried = 0;
};

// Shrinks a failing case (`outcome` its failure) within `limits`. Never returns a case that
// does not fail with outcome's kind.
ShrinkResult shrink_engine_case(const EngineCase& failing, const EngineOutcome& outcome,
                                const EngineRunOptions& run, const EngineShrinkLimits& limits);

// Deterministic for the options: no timings.
nlohmann::ordered_json to_json(const EngineFuzzOptions& options, const EngineFuzzReport& report);

} // namespace mc::fuzz
