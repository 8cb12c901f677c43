// A simulated engine run whose steps are also written as a trace (`mambacheck run --record`)
// or whose requests come from outside (`mambacheck run --workload`).
//
// The loop is the engine campaign's (fuzz/engine/engine_campaign.h): the oracle Engine
// schedules and checks each step, the GPU-side runner executes it, records and arenas are
// compared. With the same requests, seed and options it produces the same steps as the
// campaign, so `run --record` records what `run` runs. Each step is written before it is
// compared, so a trace of a failing run ends with the failing step, and replaying it gives the
// same result (tests/scenarios/record_replay_test.cpp).
#pragma once

#include "fuzz/engine/engine_campaign.h"
#include "oracle/engine/workload.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mc::scenarios {

struct SimulationOptions {
  fuzz::EngineCampaignOptions campaign; // config, spec, steps, seed, engine options, executor
  std::string preset;                   // written to the trace header (empty: inline layout)
  // The requests; empty: generated from campaign.seed as the campaign does.
  std::vector<oracle::engine::RequestSpec> requests;
  std::optional<std::filesystem::path> record; // write the steps here
  gpu::engine::RunnerMutant runner_mutant = gpu::engine::RunnerMutant::none;
};

// Throws model::InputError for impossible options, EnvironmentError when the executor
// cannot run here or the trace cannot be written.
fuzz::EngineCampaignResult simulate(const SimulationOptions& options);

} // namespace mc::scenarios
