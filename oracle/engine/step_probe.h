// Tests only: a function the oracle engine calls as it starts to run each step (Engine::step
// once the step is scheduled, Replayer::step), inside the step's scope where a failed
// MC_ASSERT is reported as a finding (model/errors.h, AssertionsReported). A test sets it to
// make an assertion of the model fail at a chosen step, and so checks that a campaign, a run
// and a replay report it as a finding of kind internal_assertion instead of aborting. Unset
// (the default, and always outside tests) it costs one test of an empty function per step.
#pragma once

#include <cstdint>
#include <functional>

namespace mc::oracle::engine {

void set_step_probe_for_testing(std::function<void(std::int64_t step)> probe);
// Calls the probe, if one is set.
void probe_step(std::int64_t step);

} // namespace mc::oracle::engine
