// The requests of one run: prompts that share prefixes, a true continuation, arrival steps.
//
// Each request's `tokens` is its whole true sequence: the prompt, then the continuation the
// model "would" produce. A request stops at max_len tokens; the sequence runs a few tokens
// past it so that drafts proposed near the end still have a truth to be compared with.
// Prefix families make prompts share their first tokens, so blocks cached by one request
// are hit by another (REFERENCE.md 3, prefix hits).
#pragma once

#include "model/prng.h"
#include "oracle/engine/options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::oracle::engine {

struct RequestSpec {
  std::string req_id;
  std::vector<std::int32_t> tokens; // truth: prompt + continuation, max_len + slack entries
  std::int32_t num_prompt_tokens = 0;
  std::int32_t max_len = 0; // finishes once it holds this many tokens
  std::int64_t arrival_step = 0;
};

// `num_requests` requests arriving over the run (at most arrivals_per_step_max a step).
std::vector<RequestSpec> generate_workload(const WorkloadOptions& options,
                                           std::int32_t num_requests, std::int32_t slack_tokens,
                                           model::SplitMix64& rng);

} // namespace mc::oracle::engine
