#include "oracle/engine/replay.h"

#include "model/conv_history.h"
#include "model/errors.h"
#include "oracle/engine/step_probe.h"
#include "oracle/engine/table_rules.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {

Replayer::Replayer(const model::Layout& layout, const RunnerOptions& options,
                   std::int32_t cache_sweep_every, Structures structures)
    : layout_(layout), cache_sweep_every_(cache_sweep_every),
      tail_tokens_(model::conv_history_rows_max(layout)),
      blocks_(layout.config, layout.num_groups(), static_cast<std::int32_t>(layout.spec.num_blocks),
              /*defer_frees=*/false, structures),
      runner_(layout, options, structures), ledger_(structures), checker_(structures) {
  MC_ASSERT(cache_sweep_every >= 1);
  MC_ASSERT(layout.config.mode != model::CacheMode::none);
}

Finding Replayer::inconsistent(std::int64_t step, std::string req_id, std::string detail,
                               std::string expected) const {
  return make_finding(layout_, FindingKind::inconsistent_step, step, std::move(req_id), -1, -1, -1,
                      std::move(detail), std::move(expected));
}

// A running request continues from what the steps before it committed; a new or resumed one
// starts from a prefix hit, which ends on a block boundary.
std::optional<Finding> Replayer::check_counts(const model::Step& step) const {
  const std::int32_t B = layout_.config.mamba_block_size;
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) {
      if (c.num_computed_tokens % B != 0)
        return inconsistent(step.index, c.req_id,
                            fmt::format("resumed with {} computed tokens, not a block boundary",
                                        c.num_computed_tokens),
                            fmt::format("a prefix hit of a multiple of {} tokens (or 0)", B));
      continue;
    }
    const auto it = computed_after_.find(c.req_id);
    if (it == computed_after_.end())
      return inconsistent(step.index, c.req_id,
                          "runs on without a table (it was preempted or never ran)",
                          "a resumed entry with a new table");
    if (it->second != c.num_computed_tokens)
      return inconsistent(step.index, c.req_id,
                          fmt::format("says {} tokens are computed", c.num_computed_tokens),
                          fmt::format("{} (what the steps before it committed)", it->second));
  }
  return std::nullopt;
}

// The shadow block manager follows the step: departures free, running requests drop their
// stale block and grow, new and resumed requests take their first tables.
std::optional<Finding> Replayer::apply_tables(const model::Step& step) {
  for (const model::RequestId& id : step.finished_req_ids) {
    blocks_.free_request(id);
    computed_after_.erase(id);
    ++stats_.finished;
  }
  for (const model::RequestId& id : step.preempted_req_ids) {
    blocks_.free_request(id);
    computed_after_.erase(id);
    ++stats_.preemptions;
  }
  if (step.reset_prefix_cache) {
    for (const auto& [id, computed] : computed_after_)
      blocks_.free_request(id);
    computed_after_.clear();
    blocks_.reset_cache();
    ++stats_.resets;
  }
  for (const model::CachedRequestData& c : step.cached_requests)
    if (!c.resumed) blocks_.remove_skipped(c.req_id, c.num_computed_tokens);
  for (const model::CachedRequestData& c : step.cached_requests)
    if (!c.resumed)
      if (auto why = blocks_.adopt_growth(c.req_id, c.new_block_ids))
        return inconsistent(step.index, c.req_id, *why, "a free block");
  // Each hit is held to the longest the shadow cache offers as the request is admitted, in
  // the scheduler's order: resumed requests (at the head of its queue) before new ones.
  // A request the ledger does not know (resumed without ever running) has no hashes: its
  // scheduled row is reported by the ledger.
  const auto first = [&](const std::string& id, const model::GroupBlockIds& table,
                         std::int32_t computed, std::span<const model::TokenHash> hashes,
                         std::int32_t num_tokens) -> std::optional<Finding> {
    if (check_prefix_hits_ && !hashes.empty()) {
      const std::int32_t longest =
          longest_prefix_hit(blocks_.pools(), layout_.config.mamba_block_size, hashes, num_tokens);
      if (auto f = check_prefix_hit(layout_, step.index, id, computed, longest)) return f;
    }
    stats_.prefix_hits += computed > 0 ? 1 : 0;
    if (auto why = blocks_.adopt_first(id, table, computed))
      return inconsistent(step.index, id, *why, "a table the block manager could give");
    return std::nullopt;
  };
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (!c.resumed) continue;
    ++stats_.resumes;
    const RequestTruth* truth = ledger_.find(c.req_id);
    if (auto f =
            first(c.req_id, c.new_block_ids, c.num_computed_tokens,
                  truth != nullptr ? std::span(truth->hashes) : std::span<const model::TokenHash>(),
                  truth != nullptr ? truth->num_tokens() : 0))
      return f;
  }
  std::vector<model::TokenHash> hashes;
  for (const model::NewRequestData& n : step.new_requests) {
    ++stats_.arrivals;
    hashes.assign(1, model::kEmptySequenceHash);
    for (const std::int32_t token : n.prompt_token_ids)
      hashes.push_back(model::extend_hash(hashes.back(), token));
    if (auto f = first(n.req_id, n.block_ids, n.num_computed_tokens, hashes,
                       static_cast<std::int32_t>(n.prompt_token_ids.size())))
      return f;
  }
  return std::nullopt;
}

// Accepted drafts at positions already known must repeat them (the ledger asserts it).
std::optional<Finding> check_known_drafts(const model::Layout& layout, const model::Step& step,
                                          const Ledger& ledger) {
  for (const model::ScheduledRequest& s : step.scheduled) {
    const RequestTruth& t = ledger.truth(s.req_id);
    for (std::int32_t j = 1; j < s.num_accepted_tokens; ++j) {
      const auto pos = static_cast<std::size_t>(t.num_committed + j);
      const std::int32_t token = s.token_ids[static_cast<std::size_t>(j)];
      if (pos < t.tokens.size() && t.tokens[pos] != token)
        return make_finding(layout, FindingKind::token_mismatch, step.index, s.req_id, -1, -1, -1,
                            fmt::format("accepts draft {} at position {}, but {} was committed",
                                        token, pos, t.tokens[pos]),
                            "accepted drafts that agree with the committed sequence");
    }
  }
  return std::nullopt;
}

void Replayer::commit(const model::Step& step) {
  for (const model::ScheduledRequest& s : step.scheduled) {
    const RequestTruth& t = ledger_.truth(s.req_id);
    computed_after_[s.req_id] = t.num_committed;
    blocks_.cache_blocks(s.req_id, t.num_committed, t.hashes, t.tokens, tail_tokens_);
    ++stats_.request_steps;
    stats_.tokens += s.num_scheduled_tokens;
  }
  ++stats_.steps;
}

std::optional<Finding> Replayer::step(const model::Step& step) {
  MC_ASSERT(!stopped_);
  stopped_ = true; // until the step completes without a finding
  last_record_ = StepRecord{.step = step.index};
  try {
    const model::AssertionsReported reported; // a broken assumption of the model: a finding
    probe_step(step.index);
    if (auto f = run_step(step)) return f;
  } catch (const model::AssertionFailure& e) {
    return internal_assertion(layout_, step.index, e);
  }
  stopped_ = false;
  return std::nullopt;
}

// The step in the order of Engine::step (replay.h).
std::optional<Finding> Replayer::run_step(const model::Step& step) {
  if (auto f = check_counts(step)) return f;
  if (auto f = check_spec_blocks_moved(layout_, step,
                                       [this](const std::string& id) { return runner_.row(id); }))
    return f;
  if (auto f = apply_tables(step)) return f;
  if (auto mismatch = ledger_.begin_step(step))
    return make_finding(layout_, FindingKind::token_mismatch, step.index, "", -1, -1, -1, *mismatch,
                        "tokens that agree with the committed sequence");
  if (auto f = check_known_drafts(layout_, step, ledger_)) return f;
  last_record_ = runner_.execute(step, ledger_);
  stats_.bytes_checked += last_record_.bytes_checked;
  for (const LaunchRecord& l : last_record_.launches) {
    ++stats_.launches;
    stats_.copies_by_kind[std::string(model::to_string(l.kind))] +=
        static_cast<std::int64_t>(l.decisions.size());
  }
  if (last_record_.finding) return last_record_.finding;
  ledger_.end_step(step);
  if (auto f =
          checker_.after_step(step, last_record_, blocks_, runner_, ledger_, stats_.bytes_checked))
    return f;
  commit(step);
  const bool sweep = stats_.steps % cache_sweep_every_ == 0;
  return checker_.after_commit(step.index, blocks_, runner_, sweep, stats_.bytes_checked);
}

} // namespace mc::oracle::engine
