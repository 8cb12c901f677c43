#include "gpu/engine/forward.cuh"
#include "gpu/engine/forward_launch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mc::gpu::engine {
namespace {

constexpr int kForwardThreads = 128;
constexpr std::int64_t kForwardCtasMax = std::int64_t{1} << 16;

// CTA k runs programs k, k + grid, ...: one (op, tensor) write each, its elements over the
// CTA's threads. A step's ops write distinct blocks (a second write of one block is what the
// oracle reports as a finding), so the programs' order does not matter.
__global__ void __launch_bounds__(kForwardThreads) forward_kernel(const ForwardParams p) {
  const std::int64_t programs = std::int64_t{p.num_ops} * p.num_tensors;
  for (std::int64_t program = blockIdx.x; program < programs; program += gridDim.x)
    forward_program(p, program, threadIdx.x, blockDim.x);
}

} // namespace

void launch_forward(const ForwardParams& params, void* stream) {
  const std::int64_t programs = std::int64_t{params.num_ops} * params.num_tensors;
  if (programs == 0) return;
  const auto ctas = static_cast<unsigned>(std::min(programs, kForwardCtasMax));
  forward_kernel<<<ctas, kForwardThreads, 0, static_cast<cudaStream_t>(stream)>>>(params);
  // No fmt in nvcc-compiled code: std::runtime_error, which the executor turns into
  // model::EnvironmentError.
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA launch of forward_kernel failed: ") +
                             cudaGetErrorString(err));
}

} // namespace mc::gpu::engine
