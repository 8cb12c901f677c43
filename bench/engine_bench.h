// The engine-level oracle benchmark: how fast the oracle
// engine alone runs a workload on one core with every invariant checked after every step.
//
// One case per preset: the scheduler and block manager, the oracle runner with the synthetic
// forward (every read verified against the ground truth) and the invariant checker, driven
// step by step by oracle::engine::Engine, single-threaded; no GPU-side runner. The workload is
// sized so that batches hold tens to hundreds of rows (many arrivals per step, a large running
// limit, token budget and pool). A request-step is one request scheduled in one step (the sum
// over steps of the rows in the step's batch). Only the step loop is timed: generating the
// workload and poisoning the arenas are not.
#pragma once

#include "model/config.h"
#include "model/layout.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/kv_manager.h"
#include "oracle/engine/options.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::oracle::engine {

// What the user asks for; a field left empty keeps the preset's default.
struct EngineBenchOptions {
  std::vector<std::string> presets; // empty: kEngineBenchPresets
  std::optional<std::int64_t> steps;
  std::optional<std::int32_t> requests;
  std::optional<std::int32_t> max_running;
  std::optional<std::int32_t> token_budget;
  std::optional<std::int64_t> pool_blocks;
  std::optional<std::int32_t> num_spec;
  std::optional<std::int32_t> layers; // per group, cut from the preset's (production: 2)
  model::RunnerFlavour runner = model::RunnerFlavour::v1;
  std::uint64_t seed = 1;
  bool reference = false; // the oracle's plain structures (structures.h): same counters, slower
};

// A tiny-state preset and a production-like one (its layers cut to fit host memory).
inline const std::vector<std::string> kEngineBenchPresets = {"tiny-mamba2", "nemotron-h-8b"};
// Arenas past this are refused (host memory), with a hint to shrink the pool or the layers.
inline constexpr std::int64_t kEngineBenchArenaBytesMax = std::int64_t{16} << 30;

// One preset with every option resolved.
struct EngineBenchCase {
  std::string preset;
  model::CacheConfig config;
  model::LayoutSpec spec;
  EngineOptions engine;
  std::int64_t steps = 0;
  std::int32_t requests = 0;
  std::uint64_t seed = 1;
};

struct EngineBenchResult {
  EngineBenchCase bench_case;
  EngineReport report;
  std::int32_t num_layers = 0;  // all groups
  std::int64_t arena_bytes = 0; // all arenas of the run
  std::int64_t rows_max = 0;    // the largest batch of a step
  double wall_seconds = 0;      // the step loop
  double cpu_seconds = 0;       // user + system time of the process over the step loop
};

// Throws InputError naming the option when a value is out of range or the preset unknown.
EngineBenchCase make_engine_bench_case(const std::string& preset,
                                       const EngineBenchOptions& options);
// With `manager`, the steps are planned through that block manager under test and judged by
// the Replayer (harness/managed_steps.h): the cost of the manager's process and protocol.
EngineBenchResult run_engine_bench(const EngineBenchCase& bench_case,
                                   KvManager* manager = nullptr);
// The report of one case: a few lines, every field named.
std::string describe(const EngineBenchResult& result);

} // namespace mc::oracle::engine
