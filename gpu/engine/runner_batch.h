// Internal to EngineRunner: the per-row arrays of the step being executed.
#pragma once

#include "gpu/engine/engine_runner.h"

namespace mc::gpu::engine {

struct EngineRunner::Batch {
  const model::Step* step = nullptr;
  std::vector<std::int32_t> slot;         // per batch row
  std::vector<std::int32_t> num_computed; // c, before the step
};

} // namespace mc::gpu::engine
