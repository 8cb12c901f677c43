// The signature of a failing launch case (fuzz/findings.h): its kind, what kind of difference
// it is, and what the oracle knows about the batch row the difference belongs to.
#pragma once

#include "fuzz/findings.h"
#include "fuzz/run_case.h"
#include "model/launch.h"

#include <optional>
#include <string>
#include <vector>

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

// Every (batch row, state) copy whose destination bytes differ, and every differing entry of
// the per-request arrays, one line each ("row 3 (slot 5), group 0 layer 2 conv, block 17: 12
// of 96 bytes differ, from byte 0"), at most `max_lines` (then "... and N more"). What a
// nondeterministic finding's runs are compared by: a race leaves different rows wrong in
// different runs.
std::vector<std::string> differing_pairs(const model::LaunchCase& launch,
                                         const model::LaunchResult& expected,
                                         const model::LaunchResult& actual,
                                         std::size_t max_lines = 8);

} // namespace mc::fuzz
