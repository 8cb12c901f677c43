// The engine-level comparison (DESIGN.md, "Engine level"): the oracle engine's scheduler
// produces each Step, the oracle runner executes it with every invariant, and the GPU-side
// runner (gpu/engine, host or cuda executor) executes the same Step; after every step the
// launches (kind, status, decisions, every per-request array) and every arena byte must be
// equal. The first difference is named: step, launch, request, group, layer, state, block and
// byte range.
#pragma once

#include "gpu/engine/engine_runner.h"
#include "model/layout.h"
#include "oracle/engine/driver.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mc::fuzz {

struct EngineCampaignOptions {
  model::CacheConfig config;
  model::LayoutSpec spec;
  std::int64_t num_steps = 100;
  std::int32_t num_requests = 8;
  std::uint64_t seed = 1;
  oracle::engine::EngineOptions engine; // runner.flavour / v1_copy_path drive both sides
  gpu::engine::ExecutorKind executor = gpu::engine::ExecutorKind::host;
};

struct EngineCampaignResult {
  oracle::engine::EngineReport report; // the oracle's (steps, preemptions, hits, copies)
  std::int64_t steps_compared = 0;
  std::int64_t bytes_compared = 0;
  std::optional<std::string> mismatch;            // first oracle vs backend difference
  std::optional<oracle::engine::Finding> finding; // first broken invariant (oracle side)
  bool held() const { return !mismatch && !finding; }
};

// Throws model::InputError for impossible options and model::EnvironmentError when the
// executor cannot run here.
EngineCampaignResult run_engine_campaign(const EngineCampaignOptions& options);

// The first difference between the two records of one step, or nullopt.
std::optional<std::string> compare_step(const model::Layout& layout, const model::Step& step,
                                        const oracle::engine::StepRecord& oracle_record,
                                        const gpu::engine::StepRecord& gpu_record);

// The first arena byte that differs, named by tensor and block, or nullopt.
std::optional<std::string> compare_arenas(const model::Layout& layout,
                                          const std::vector<model::Arena>& oracle_arenas,
                                          const std::vector<model::Arena>& gpu_arenas,
                                          std::int64_t& bytes_compared);

} // namespace mc::fuzz
