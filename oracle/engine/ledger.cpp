#include "oracle/engine/ledger.h"

#include "model/errors.h"

#include <fmt/format.h>

namespace mc::oracle::engine {

void Ledger::append(RequestTruth& t, std::int32_t token) {
  t.hashes.push_back(model::extend_hash(t.hashes.back(), token));
  t.tokens.push_back(token);
}

std::optional<std::string> Ledger::begin_step(const model::Step& step) {
  for (const model::RequestId& id : step.finished_req_ids)
    requests_.erase(id);
  for (const model::NewRequestData& n : step.new_requests) {
    MC_ASSERT(!requests_.contains(n.req_id));
    RequestTruth& t = requests_[n.req_id];
    t.hashes.push_back(model::kEmptySequenceHash);
    for (const std::int32_t token : n.prompt_token_ids)
      append(t, token);
  }
  std::unordered_map<std::string, std::int32_t> computed;
  for (const model::NewRequestData& n : step.new_requests)
    computed[n.req_id] = n.num_computed_tokens;
  for (const model::CachedRequestData& c : step.cached_requests)
    computed[c.req_id] = c.num_computed_tokens;
  for (const model::ScheduledRequest& s : step.scheduled) {
    RequestTruth& t = requests_.at(s.req_id);
    const std::int32_t c = computed.at(s.req_id);
    t.num_committed = c; // a preempted request restarts from its prefix hit (or 0)
    for (std::int32_t i = 0; i < s.num_scheduled_tokens - s.num_draft_tokens; ++i) {
      const std::int32_t pos = c + i;
      const std::int32_t token = s.token_ids[static_cast<std::size_t>(i)];
      if (pos < static_cast<std::int32_t>(t.tokens.size())) {
        if (t.tokens[static_cast<std::size_t>(pos)] != token)
          return fmt::format("request {} schedules token {} at position {}, but {} was committed",
                             s.req_id, token, pos, t.tokens[static_cast<std::size_t>(pos)]);
      } else if (pos == static_cast<std::int32_t>(t.tokens.size())) {
        append(t, token);
      } else {
        return fmt::format("request {} schedules position {} past its {} known tokens", s.req_id,
                           pos, t.tokens.size());
      }
    }
  }
  return std::nullopt;
}

void Ledger::end_step(const model::Step& step) {
  for (const model::ScheduledRequest& s : step.scheduled) {
    RequestTruth& t = requests_.at(s.req_id);
    if (s.num_draft_tokens == 0) {
      t.num_committed += s.num_scheduled_tokens;
      continue;
    }
    // The bonus token at position c is known; accepted drafts extend the sequence.
    for (std::int32_t j = 1; j < s.num_accepted_tokens; ++j) {
      const std::int32_t pos = t.num_committed + j;
      const std::int32_t token = s.token_ids[static_cast<std::size_t>(j)];
      if (pos < static_cast<std::int32_t>(t.tokens.size()))
        MC_ASSERT(t.tokens[static_cast<std::size_t>(pos)] == token);
      else
        append(t, token);
    }
    t.num_committed += s.num_accepted_tokens;
  }
}

const RequestTruth& Ledger::truth(const std::string& req_id) const {
  const auto it = requests_.find(req_id);
  MC_ASSERT(it != requests_.end());
  return it->second;
}

model::TokenHash Ledger::hash_after(const std::string& req_id, std::int32_t num_tokens) const {
  const RequestTruth& t = truth(req_id);
  MC_ASSERT(num_tokens >= 0 && num_tokens < static_cast<std::int32_t>(t.hashes.size()));
  return t.hashes[static_cast<std::size_t>(num_tokens)];
}

} // namespace mc::oracle::engine
