// The backends a subcommand can run a launch on, by name (DESIGN.md, "Backends").
#pragma once

#include "fuzz/run_case.h"
#include "model/backend.h"

#include <string_view>

namespace mc::backends {

using model::Backend;
using model::to_string;

// oracle, host or cuda; InputError for any other name (external is `--external CMD`).
Backend parse_backend(std::string_view name);
// EnvironmentError (exit 3) when the backend cannot run here (cuda without a device).
void require_backend(Backend backend);
// The default of campaigns: cuda when a device is present, host otherwise.
Backend default_backend();
// The launches of `backend`, as the kernel-level checks take a backend (fuzz/run_case.h).
fuzz::LaunchRunner launch_runner(Backend backend);

} // namespace mc::backends
