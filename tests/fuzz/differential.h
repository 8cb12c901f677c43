// Differential properties: a generated case run on the oracle and on a backend must give
// equal results (model/LAUNCH_KINDS.md, "What a result holds"), checked by
// compare_results; a failure names the first difference and describes the case.
//
// check_property runs a RapidCheck property with an explicit number of cases and size
// (per property, unlike RC_GTEST_PROP's global default of 100), unless RC_PARAMS sets
// max_success itself; RC_PARAMS's seed is honoured either way, so a failure replays.
#pragma once

#include "fuzz/compare.h"
#include "fuzz/gen_launch.h"

#include <rapidcheck.h>

#include <functional>
#include <string>

namespace mc::fuzz::testing {

using Backend = std::function<model::LaunchResult(const model::LaunchCase&)>;

// One case: generate with `options`, run both sides, RC_FAIL on any difference.
void oracle_matches(const GenOptions& options, const std::string& backend_name,
                    const Backend& backend);

// Runs `property` for `cases` successes at sizes up to `max_size`; fails the current
// GoogleTest test with RapidCheck's report (shrunk counterexample) on failure.
void check_property(int cases, int max_size, const std::function<void()>& property);

} // namespace mc::fuzz::testing
