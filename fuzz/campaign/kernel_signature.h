// The signature of a failing launch case (fuzz/findings.h): its kind, what kind of difference
// it is, and what the oracle knows about the batch row the difference belongs to.
#pragma once

#include "fuzz/findings.h"
#include "fuzz/run_case.h"
#include "model/launch.h"

#include <optional>

namespace mc::fuzz {

// `outcome` failed (run_case.h); its classification is left deterministic for the caller
// to set from the reruns.
Signature kernel_signature(const model::LaunchCase& launch, const CaseOutcome& outcome);

// The batch row a difference belongs to: the row of a differing decision, the row owning a
// differing per-request entry, or the row whose copy writes the differing block; nothing
// when no row does (a stray write, a status).
std::optional<std::int32_t> failing_row(const model::LaunchCase& launch,
                                        const model::LaunchResult& oracle,
                                        const Difference& difference);

} // namespace mc::fuzz
