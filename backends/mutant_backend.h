// Launch runners with the kernels of a mutant, for `fuzz --mutant`, `mutants` and `gate`.
#pragma once

#include "backends/backend.h"
#include "fuzz/mutants/mutants.h"
#include "gpu/mutant.h"

#include <string>

namespace mc::backends {

// host or cuda, running the kernels of the mutant it is called with.
fuzz::MutantLaunchRunner mutant_launch_runner(Backend backend);

// A campaign's backend: `backend`'s clean kernels for Mutant::none, else the kernels of
// `mutant` (what `fuzz --mutant` runs, in the campaign's process and in its case workers).
fuzz::LaunchRunner kernel_runner(Backend backend, gpu::Mutant mutant);

// The kernel mutant named `name` ("none" allowed); InputError listing the names otherwise.
gpu::Mutant parse_kernel_mutant(const std::string& name);

} // namespace mc::backends
