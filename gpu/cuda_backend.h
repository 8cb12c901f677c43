// The `cuda` backend: the kernels of gpu/kernels/ launched on the GPU over device copies of
// the case's arenas, block tables and per-request arrays; the result is downloaded.
// This header needs no CUDA: in a build without nvcc (MC_HAVE_CUDA undefined) the library
// behind it says so (cuda_available() is false, run_launch_cuda throws).
#pragma once

#include "gpu/mutant.h"
#include "model/launch.h"

namespace mc::gpu {

// True when this build has CUDA and a device is visible.
bool cuda_available();

// Runs one launch on device 0 (with the kernels of `mutant`). Throws model::EnvironmentError
// when there is no device (or the build has no CUDA, "built without CUDA") and
// model::InputError for an invalid case.
model::LaunchResult run_launch_cuda(const model::LaunchCase& launch,
                                    Mutant mutant = Mutant::none);

} // namespace mc::gpu
