// MC_CUDA_CHECK(expr): a CUDA runtime call that must succeed. A failure throws
// model::EnvironmentError naming the file, line, call and CUDA's error string.
#pragma once

#include "model/errors.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace mc::gpu {

[[noreturn]] inline void cuda_failed(cudaError_t err, const char* expr, const char* file,
                                     int line) {
  throw model::EnvironmentError(fmt::format("CUDA error at {}:{}: {} failed: {} ({})", file, line,
                                            expr, cudaGetErrorString(err), cudaGetErrorName(err)));
}

} // namespace mc::gpu

#define MC_CUDA_CHECK(expr)                                                                        \
  do {                                                                                             \
    const cudaError_t mc_cuda_err_ = (expr);                                                       \
    if (mc_cuda_err_ != cudaSuccess)                                                               \
      ::mc::gpu::cuda_failed(mc_cuda_err_, #expr, __FILE__, __LINE__);                             \
  } while (0)
