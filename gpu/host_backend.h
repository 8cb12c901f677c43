// The `host` backend: the kernels' own per-program bodies (gpu/kernels/*.cuh) run on the
// CPU, one program after another in grid order with a one-thread team, over host arenas.
// CI runs the oracle against it; races only show on the `cuda` backend.
#pragma once

#include "model/launch.h"

namespace mc::gpu {

// Runs one launch. Throws model::InputError for a malformed or invalid case.
model::LaunchResult run_launch_host(const model::LaunchCase& launch);

} // namespace mc::gpu
