// MC_CUDA_CHECK(expr): a CUDA runtime call that must succeed. A failure throws
// model::EnvironmentError naming the file, line, call and CUDA's error string.
// on_device(f): runs f, turning any other std::runtime_error it throws (kernel_launch.cu
// reports launch failures that way) into model::EnvironmentError.
#pragma once

#include "model/errors.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mc::gpu {

// The errors after which the context is unusable (CUDA's "sticky" errors).
inline bool context_lost(cudaError_t err) {
  switch (err) {
  case cudaErrorIllegalAddress:
  case cudaErrorMisalignedAddress:
  case cudaErrorIllegalInstruction:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorHardwareStackError:
  case cudaErrorLaunchFailure:
  case cudaErrorAssert:
    return true;
  default:
    return false;
  }
}

[[noreturn]] inline void cuda_failed(cudaError_t err, const char* expr, const char* file,
                                     int line) {
  const std::string message = fmt::format("CUDA error at {}:{}: {} failed: {} ({})", file, line,
                                          expr, cudaGetErrorString(err), cudaGetErrorName(err));
  if (context_lost(err)) throw model::DeviceFault(message);
  throw model::EnvironmentError(message);
}

// A CUDA failure is the machine's (exit 3); an invalid case stays an input error (exit 2).
template <class F> void on_device(F&& f) {
  try {
    f();
  } catch (const model::InputError&) {
    throw;
  } catch (const model::EnvironmentError&) {
    throw; // DeviceFault included
  } catch (const std::runtime_error& e) {
    throw model::EnvironmentError(e.what());
  }
}

} // namespace mc::gpu

#define MC_CUDA_CHECK(expr)                                                                        \
  do {                                                                                             \
    const cudaError_t mc_cuda_err_ = (expr);                                                       \
    if (mc_cuda_err_ != cudaSuccess)                                                               \
      ::mc::gpu::cuda_failed(mc_cuda_err_, #expr, __FILE__, __LINE__);                             \
  } while (0)
