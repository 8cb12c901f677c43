// The scheduler mutants (gpu/mutant.h, MC_SCHEDULER_MUTANTS): bugs of the scheduler or block
// manager, planted as rewrites of the steps the oracle's scheduler makes. The oracle is the
// specification and holds no mutation (DESIGN.md), so each mutant is an edit of the step
// (harness::ScheduledSteps' `edit`) that turns it into the step a scheduler with that bug would
// have sent: the tables, counts and tokens of the step say what the buggy scheduler chose, and
// the oracle runs and checks that step as it runs a step read from a trace. The run stops at
// the first finding, so the oracle's scheduler never plans from a state the edit changed. A
// trace written from the edited steps holds the bug itself and replays to the same finding
// without the mutant.
#pragma once

#include "gpu/mutant.h"
#include "model/step.h"
#include "oracle/engine/driver.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace mc::harness {

enum class SchedulerMutant : std::uint8_t {
  none, // the steps as the oracle's scheduler made them
#define MC_SCHEDULER_MUTANT_ENUMERATOR(name, bug_class, description) name,
  MC_SCHEDULER_MUTANTS(MC_SCHEDULER_MUTANT_ENUMERATOR)
#undef MC_SCHEDULER_MUTANT_ENUMERATOR
};

std::string_view to_string(SchedulerMutant mutant); // "none" for the clean scheduler
std::optional<SchedulerMutant> find_scheduler_mutant(std::string_view name);

// The edit that rewrites every step `engine` schedules as the mutant's scheduler would have
// made it; empty for none. `engine` must outlive the edit.
std::function<void(model::Step&)> scheduler_mutant_edit(SchedulerMutant mutant,
                                                        oracle::engine::Engine& engine);

} // namespace mc::harness
