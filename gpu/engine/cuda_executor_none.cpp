// The cuda executor in a build without nvcc: says so (EnvironmentError, exit 3).
#include "gpu/engine/executor.h"
#include "model/errors.h"

namespace mc::gpu::engine {

std::unique_ptr<Executor> make_cuda_executor(const model::Layout& /*layout*/,
                                             Mutant /*kernel_mutant*/) {
  throw model::EnvironmentError(
      "the cuda engine backend needs a build with CUDA (built without CUDA)");
}

} // namespace mc::gpu::engine
