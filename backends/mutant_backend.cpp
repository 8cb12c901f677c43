#include "backends/mutant_backend.h"

#include "gpu/cuda_backend.h"
#include "gpu/host_backend.h"
#include "model/errors.h"

namespace mc::backends {

fuzz::MutantLaunchRunner mutant_launch_runner(Backend backend) {
  MC_ASSERT(backend == Backend::host || backend == Backend::cuda);
  if (backend == Backend::cuda)
    return [](const model::LaunchCase& c, gpu::Mutant m) { return gpu::run_launch_cuda(c, m); };
  return [](const model::LaunchCase& c, gpu::Mutant m) { return gpu::run_launch_host(c, m); };
}

fuzz::LaunchRunner kernel_runner(Backend backend, gpu::Mutant mutant) {
  if (mutant == gpu::Mutant::none) return launch_runner(backend);
  return [run = mutant_launch_runner(backend), mutant](const model::LaunchCase& launch) {
    return run(launch, mutant);
  };
}

gpu::Mutant parse_kernel_mutant(const std::string& name) {
  if (const auto m = gpu::find_kernel_mutant(name)) return *m;
  std::string names;
  for (const gpu::MutantInfo& info : gpu::kernel_mutants())
    names += (names.empty() ? "" : ", ") + std::string(info.name);
  model::fail_input("--mutant: no kernel mutant named '{}' (kernel mutants: {})", name, names);
}

} // namespace mc::backends
