#include "oracle/engine/ledger.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {

Ledger::Ledger(Structures structures)
    : keep_rows_(structures == Structures::fast), requests_(structures), listed_(structures) {}

void Ledger::append(RequestTruth& t, std::int32_t token) {
  t.hashes.push_back(model::extend_hash(t.hashes.back(), token));
  t.tokens.push_back(token);
}

std::optional<std::string> Ledger::begin_step(const model::Step& step) {
  for (const model::RequestId& id : step.finished_req_ids)
    requests_.erase(id);
  listed_.clear();
  for (const model::NewRequestData& n : step.new_requests) {
    MC_ASSERT(!requests_.contains(n.req_id));
    RequestTruth& t = requests_.emplace(n.req_id, n.key);
    t.hashes.reserve(n.prompt_token_ids.size() + 1);
    t.tokens.reserve(n.prompt_token_ids.size());
    t.hashes.push_back(model::kEmptySequenceHash);
    for (const std::int32_t token : n.prompt_token_ids)
      append(t, token);
    t.num_prompt_tokens = static_cast<std::int32_t>(n.prompt_token_ids.size());
    t.listed_step = step.index;
    t.listed_computed = n.num_computed_tokens;
    listed_.add_new(n.req_id, t);
  }
  for (const model::CachedRequestData& c : step.cached_requests) {
    RequestTruth* t = requests_.find(c.req_id, c.key);
    if (t == nullptr) continue; // not known: its scheduled row fails below
    t->listed_step = step.index;
    t->listed_computed = c.num_computed_tokens;
    listed_.add_cached(c.req_id, *t);
  }
  rows_step_ = -1; // until every row is known to agree
  rows_.clear();
  for (const model::ScheduledRequest& s : step.scheduled) {
    RequestTruth& t =
        listed_.next_row(s.req_id, [this, &s](const std::string& id) -> RequestTruth& {
          return requests_.at(id, s.key);
        });
    if (keep_rows_) rows_.push_back(&t);
    MC_ASSERT(t.listed_step == step.index); // every scheduled request is new or cached (step.h)
    const std::int32_t c = t.listed_computed;
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
  rows_step_ = step.index;
  return std::nullopt;
}

void Ledger::end_step(const model::Step& step) {
  MC_ASSERT(rows_step_ == step.index);
  MC_ASSERT(!keep_rows_ || rows_.size() == step.scheduled.size());
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    RequestTruth& t = keep_rows_ ? *rows_[b] : requests_.at(s.req_id);
    // With drafts: the bonus token at position c is known; accepted drafts extend the sequence.
    for (std::int32_t j = 1; s.num_draft_tokens > 0 && j < s.num_accepted_tokens; ++j) {
      const std::int32_t pos = t.num_committed + j;
      const std::int32_t token = s.token_ids[static_cast<std::size_t>(j)];
      if (pos < static_cast<std::int32_t>(t.tokens.size()))
        MC_ASSERT(t.tokens[static_cast<std::size_t>(pos)] == token);
      else
        append(t, token);
    }
    t.num_committed += s.num_draft_tokens > 0 ? s.num_accepted_tokens : s.num_scheduled_tokens;
    t.num_committed_max = std::max(t.num_committed_max, t.num_committed);
  }
}

const RequestTruth& Ledger::row_truth(const model::Step& step, std::size_t batch_row) const {
  MC_ASSERT(step.index == rows_step_);
  MC_ASSERT(batch_row < step.scheduled.size());
  if (!keep_rows_) return requests_.at(step.scheduled[batch_row].req_id);
  MC_ASSERT(rows_.size() == step.scheduled.size());
  return *rows_[batch_row];
}

} // namespace mc::oracle::engine
