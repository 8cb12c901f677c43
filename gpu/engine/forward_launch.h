// The synthetic forward on the GPU (forward.cuh's programs, one CTA each, its threads as the
// program's lanes), for the cuda engine executor. Host C++ calls it; nvcc compiles the kernel
// in forward_kernel.cu. A failed launch throws std::runtime_error (no fmt under nvcc).
#pragma once

#include "gpu/engine/forward_types.h"

namespace mc::gpu::engine {

// Launches the read programs, then the forward, over `params` (every pointer in it device
// memory; read_diffs zeroed) on `stream` (a cudaStream_t; nullptr: the default stream). Does
// not wait.
void launch_forward(const ForwardParams& params, void* stream);

} // namespace mc::gpu::engine
