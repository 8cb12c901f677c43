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

// CTA k runs read programs k, k + grid, ...: each thread ORs the differences of its elements
// into the program's word. A launch of its own, before the writes: a row may read a column
// that one of its writes replaces.
__global__ void __launch_bounds__(kForwardThreads) forward_read_kernel(const ForwardParams p) {
  const std::int64_t programs = std::int64_t{p.num_reads} * p.num_tensors;
  for (std::int64_t program = blockIdx.x; program < programs; program += gridDim.x) {
    const std::uint64_t diff = forward_read_diff(p, program, threadIdx.x, blockDim.x);
    if (diff != 0)
      atomicOr(reinterpret_cast<unsigned long long*>(p.read_diffs + program),
               static_cast<unsigned long long>(diff));
  }
}

// No fmt in nvcc-compiled code: std::runtime_error, which the executor turns into
// model::EnvironmentError.
void check_launch(const char* kernel) {
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA launch of ") + kernel +
                             " failed: " + cudaGetErrorString(err));
}

} // namespace

void launch_forward(const ForwardParams& params, void* stream) {
  const std::int64_t read_programs = std::int64_t{params.num_reads} * params.num_tensors;
  if (read_programs > 0) {
    const auto ctas = static_cast<unsigned>(std::min(read_programs, kForwardCtasMax));
    forward_read_kernel<<<ctas, kForwardThreads, 0, static_cast<cudaStream_t>(stream)>>>(params);
    check_launch("forward_read_kernel");
  }
  const std::int64_t programs = std::int64_t{params.num_ops} * params.num_tensors;
  if (programs == 0) return;
  const auto ctas = static_cast<unsigned>(std::min(programs, kForwardCtasMax));
  forward_kernel<<<ctas, kForwardThreads, 0, static_cast<cudaStream_t>(stream)>>>(params);
  check_launch("forward_kernel");
}

} // namespace mc::gpu::engine
