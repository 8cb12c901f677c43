// The runner mutants: deliberate bugs in the host-side bookkeeping of the engine runner
// (columns, slots, accepted counts, which launches run with which arrays), selected at run
// time with `--mutant NAME`; the kernels are untouched. They are listed, with the kernel
// mutants, in the one catalogue of gpu/mutant.h (MC_RUNNER_MUTANTS); the enum and the
// factory below are generated from that list. A runner mutant is a RunnerDecisions
// (runner_decisions.h) of the same name that redefines the one decision it gets wrong; the
// runner asks its decisions object at every mutation point, so its own code names no mutant.
// Each is modelled on a bug class of REFERENCE.md 5 and must be killed by the engine-level
// fuzz (fuzz/engine/engine_fuzz.h).
#pragma once

#include "gpu/engine/runner_decisions.h"
#include "gpu/mutant.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace mc::gpu::engine {

enum class RunnerMutant : std::uint8_t {
  none, // the runner as specified (engine_runner.h)
#define MC_RUNNER_MUTANT_ENUMERATOR(name, bug_class, description) name,
  MC_RUNNER_MUTANTS(MC_RUNNER_MUTANT_ENUMERATOR)
#undef MC_RUNNER_MUTANT_ENUMERATOR
};

std::string_view to_string(RunnerMutant mutant); // "none" for the clean runner
std::optional<RunnerMutant> find_runner_mutant(std::string_view name);

// The runner's decisions under `mutant`: the specified ones for RunnerMutant::none.
std::unique_ptr<RunnerDecisions> make_runner_decisions(RunnerMutant mutant);

} // namespace mc::gpu::engine
