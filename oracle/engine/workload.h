// The requests of one run: prompts that share prefixes, a true continuation, arrival steps
// (model/request_spec.h says what a request holds). Prefix families make prompts share their first
// tokens, so blocks cached by one request are hit by another (REFERENCE.md 3, prefix hits).
#pragma once

#include "model/prng.h"
#include "model/request_spec.h"
#include "oracle/engine/options.h"

#include <cstdint>
#include <vector>

namespace mc::oracle::engine {

using RequestSpec = model::RequestSpec;

// `num_requests` requests arriving over the run (at most arrivals_per_step_max a step).
std::vector<RequestSpec> generate_workload(const WorkloadOptions& options,
                                           std::int32_t num_requests, std::int32_t slack_tokens,
                                           model::SplitMix64& rng);

} // namespace mc::oracle::engine
