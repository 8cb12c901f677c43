#include "backends/backend.h"

#include "gpu/cuda_backend.h"
#include "gpu/host_backend.h"
#include "model/errors.h"
#include "oracle/launch.h"

namespace mc::backends {

Backend parse_backend(std::string_view name) {
  const std::optional<Backend> b = model::find_backend(name);
  if (b && *b != Backend::external) return *b;
  model::fail_input("--backend: expected oracle, host or cuda, got '{}'", name);
}

void require_backend(Backend backend) {
  if (backend == Backend::cuda && !gpu::cuda_available())
    throw model::EnvironmentError("--backend cuda: no CUDA device is usable here (or this "
                                  "build has no CUDA); use --backend host");
}

Backend default_backend() {
  return gpu::cuda_available() ? Backend::cuda : Backend::host;
}

fuzz::LaunchRunner launch_runner(Backend backend) {
  switch (backend) {
  case Backend::oracle:
    return [](const model::LaunchCase& launch_case) { return oracle::run_launch(launch_case); };
  case Backend::host:
    return [](const model::LaunchCase& launch_case) { return gpu::run_launch_host(launch_case); };
  case Backend::cuda:
    return [](const model::LaunchCase& launch_case) { return gpu::run_launch_cuda(launch_case); };
  case Backend::external: // an external worker runs its launches itself
    break;
  }
  MC_ASSERT(false);
  return {};
}

} // namespace mc::backends
