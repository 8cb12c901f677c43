#include "oracle/engine/workload.h"

#include "model/errors.h"

#include <fmt/format.h>

namespace mc::oracle::engine {
namespace {

std::vector<std::vector<std::int32_t>> make_prefixes(const WorkloadOptions& options,
                                                     model::SplitMix64& rng) {
  std::vector<std::vector<std::int32_t>> prefixes(
      static_cast<std::size_t>(options.num_shared_prefixes));
  for (auto& prefix : prefixes) {
    prefix.resize(static_cast<std::size_t>(options.prompt_len_max));
    for (auto& token : prefix)
      token = rng.uniform32(0, options.vocab_size - 1);
  }
  return prefixes;
}

} // namespace

std::vector<RequestSpec> generate_workload(const WorkloadOptions& options,
                                           std::int32_t num_requests, std::int32_t slack_tokens,
                                           model::SplitMix64& rng) {
  MC_ASSERT(num_requests >= 0 && num_requests <= kRequestsMax);
  MC_ASSERT(slack_tokens >= 0);
  const auto prefixes = make_prefixes(options, rng);
  std::vector<RequestSpec> requests;
  requests.reserve(static_cast<std::size_t>(num_requests));
  std::int64_t step = 0;
  std::int32_t arrived_this_step = 0;
  for (std::int32_t i = 0; i < num_requests; ++i) {
    if (arrived_this_step >= options.arrivals_per_step_max || rng.chance(300'000)) {
      step += rng.uniform(1, 3);
      arrived_this_step = 0;
    }
    ++arrived_this_step;
    RequestSpec r{.req_id = fmt::format("r{}", i), .arrival_step = step};
    r.num_prompt_tokens = rng.uniform32(options.prompt_len_min, options.prompt_len_max);
    r.max_len = r.num_prompt_tokens + rng.uniform32(options.output_len_min, options.output_len_max);
    r.tokens.resize(static_cast<std::size_t>(r.max_len + slack_tokens));
    for (auto& token : r.tokens)
      token = rng.uniform32(0, options.vocab_size - 1);
    if (!prefixes.empty() && rng.chance(options.shared_prefix_per_million)) {
      const auto& prefix = prefixes[static_cast<std::size_t>(
          rng.uniform(0, static_cast<std::int64_t>(prefixes.size()) - 1))];
      const std::int32_t shared = rng.uniform32(1, r.num_prompt_tokens);
      std::copy(prefix.begin(), prefix.begin() + shared, r.tokens.begin());
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

} // namespace mc::oracle::engine
