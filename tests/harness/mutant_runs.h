// The small simulated runs the comparison tests end with every runner mutant: tiny-mamba2 with a
// pool small enough for preemptions, resets and aborts, in three mode and runner pairs (align V1
// and V2, all mode V1), each clean and with every runner mutant.
#pragma once

#include "gpu/mutant.h"
#include "harness/difference.h"
#include "harness/simulate.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mc::harness::testing {

inline SimulationOptions small_pool_run(model::CacheMode mode, model::RunnerFlavour runner,
                                        gpu::engine::RunnerMutant mutant) {
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  SimulationOptions s{.config = preset.config, .spec = preset.spec, .preset = "tiny-mamba2"};
  s.config.mode = mode;
  if (mode == model::CacheMode::all) { // all mode runs without drafts
    s.config.num_spec_tokens = 0;
    s.config.num_spec_blocks = 0;
  }
  s.spec.num_blocks = mode == model::CacheMode::all ? 24 : 12; // all mode: a block per B tokens
  s.engine.runner.flavour = runner;
  s.engine.scheduler.reset_prefix_cache_per_million = 30'000;
  s.engine.scheduler.abort_per_million = 20'000;
  s.num_steps = 300;
  s.num_requests = 40;
  s.seed = 3;
  s.runner_mutant = mutant;
  return s;
}

// Every pair's run, clean first, then with each runner mutant in catalogue order.
inline std::vector<SimulationOptions> runner_mutant_runs() {
  using model::CacheMode, model::RunnerFlavour;
  std::vector<SimulationOptions> runs;
  for (const auto& [mode, runner] : {std::pair{CacheMode::align, RunnerFlavour::v1},
                                     std::pair{CacheMode::align, RunnerFlavour::v2},
                                     std::pair{CacheMode::all, RunnerFlavour::v1}})
    for (std::size_t m = 0; m <= gpu::runner_mutants().size(); ++m)
      runs.push_back(small_pool_run(mode, runner, static_cast<gpu::engine::RunnerMutant>(m)));
  return runs;
}

// The align V1 run, clean, recorded as `dir`/clean.jsonl for the kernel mutants' replays.
inline std::filesystem::path record_clean_run(const std::filesystem::path& dir) {
  SimulationOptions s = small_pool_run(model::CacheMode::align, model::RunnerFlavour::v1,
                                       gpu::engine::RunnerMutant::none);
  s.record = dir / "clean.jsonl";
  EXPECT_TRUE(simulate(s).held());
  return *s.record;
}

// Two runs of `name` ended alike: both held, or both at the same step with the same difference.
inline void expect_same_outcome(const std::string& name, const std::optional<Difference>& a,
                                const std::optional<Difference>& b) {
  ASSERT_EQ(a.has_value(), b.has_value()) << name;
  if (!a) return;
  EXPECT_EQ(a->step, b->step) << name;
  EXPECT_EQ(a->kind, b->kind) << name;
  EXPECT_EQ(a->text, b->text) << name;
}

} // namespace mc::harness::testing
