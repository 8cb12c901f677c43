// The cuda backend of a build without nvcc: nothing to run on.
#include "gpu/cuda_backend.h"
#include "model/errors.h"

namespace mc::gpu {

bool cuda_available() {
  return false;
}

std::optional<int> cuda_device_count() {
  return std::nullopt;
}

void use_cuda_device(int) {
  throw model::EnvironmentError("built without CUDA");
}

void check_cuda_environment() {}

bool cuda_context_usable() {
  return false;
}

model::LaunchResult run_launch_cuda(const model::LaunchCase&, Mutant) {
  throw model::EnvironmentError("built without CUDA");
}

} // namespace mc::gpu
