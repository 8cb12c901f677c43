// The batch of one step (running requests, then waiting ones) and the commit after it.
// Split from scheduler.cpp to keep each file to one idea: here, who gets tokens and blocks.
#include "model/errors.h"
#include "oracle/engine/scheduler.h"
#include "oracle/engine/table_rules.h"

#include <algorithm>

namespace mc::oracle::engine {

void Scheduler::schedule_running(model::Step& step, std::int32_t& budget) {
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    SchedRequest& r = requests_[running_[i]];
    std::int32_t num_draft = 0;
    std::int32_t num_new = 0;
    if (in_prefill(r)) {
      num_new = split_chunk(r, std::min(r.num_tokens - r.num_computed, budget));
    } else {
      MC_ASSERT(r.num_computed == r.num_tokens - 1);
      num_draft = draw_drafts(r, budget);
      num_new = 1 + num_draft;
    }
    // A split that yields zero with the whole budget would never progress (class H).
    MC_ASSERT(num_new > 0 || budget < options_.token_budget);
    if (num_new == 0) {
      ++i;
      continue;
    }
    const std::string& id = r.spec.req_id;
    const auto key = static_cast<std::int32_t>(running_[i]);
    // A running request holds its tables; preempting others below leaves them in place.
    RequestBlocks* held = blocks_.find_held(id, key);
    MC_ASSERT(held != nullptr);
    blocks_.remove_skipped(*held, r.num_computed);
    bool self_preempted = false;
    while (!blocks_.can_allocate(*held, r.num_computed + num_new)) {
      self_preempted = running_.size() - 1 == i;
      preempt(running_.size() - 1, step);
      if (self_preempted) break;
    }
    if (self_preempted) break;
    if (spare_cached_.empty()) spare_cached_.emplace_back();
    step.cached_requests.push_back(std::move(spare_cached_.back()));
    spare_cached_.pop_back();
    model::CachedRequestData& cached = step.cached_requests.back();
    cached.req_id = id;
    cached.key = key;
    cached.resumed = false;
    cached.num_computed_tokens = r.num_computed;
    blocks_.allocate(*held, r.num_computed + num_new, cached.new_block_ids);
    make_scheduled(r, num_new, num_draft, *held, step);
    budget -= num_new;
    ++i;
  }
}

void Scheduler::schedule_waiting(model::Step& step, std::int32_t& budget) {
  while (budget > 0 && !waiting_.empty() &&
         static_cast<std::int32_t>(running_.size()) < options_.max_running) {
    const std::size_t idx = waiting_.front();
    if (!admit_one(requests_[idx], step, budget)) break;
    waiting_.pop_front();
    running_.push_back(idx);
  }
}

// First allocation of a new or resumed request, with the rightmost prefix hit (the hit
// covers at most num_tokens - 1 tokens: one token is always computed).
bool Scheduler::admit_one(SchedRequest& r, model::Step& step, std::int32_t& budget) {
  MC_ASSERT(r.num_computed == 0);
  const std::int32_t B = config_.mamba_block_size;
  std::vector<model::TokenHash> boundaries;
  for (std::int32_t p = 0; (p + 1) * B <= r.num_tokens - 1; ++p)
    boundaries.push_back(r.prefix_hashes[static_cast<std::size_t>((p + 1) * B)]);
  const std::int32_t hit =
      blocks_.find_cache_hit(boundaries, static_cast<std::int32_t>(boundaries.size()));
  const std::int32_t longest =
      longest_prefix_hit(blocks_.pools(), B, r.prefix_hashes, r.num_tokens);
  r.num_computed = hit >= 0 ? (hit + 1) * B : 0;
  const std::int32_t num_new = split_chunk(r, std::min(r.num_tokens - r.num_computed, budget));
  const std::string& id = r.spec.req_id;
  if (num_new > 0 && hit >= 0)
    blocks_.start_with_hit(id, hit, boundaries[static_cast<std::size_t>(hit)]);
  if (num_new == 0 || !blocks_.can_allocate(id, r.num_computed + num_new)) {
    blocks_.free_request(id); // gives a touched hit block back
    r.num_computed = 0;
    return false;
  }
  blocks_.allocate(id, r.num_computed + num_new);
  const auto key = static_cast<std::int32_t>(&r - requests_.data());
  RequestBlocks* rb = blocks_.find_held(id, key);
  model::GroupBlockIds table;
  for (const GroupRow& row : rb->groups)
    table.push_back(row.block_ids);
  if (!r.started) {
    step.new_requests.push_back(
        {.req_id = id,
         .prompt_token_ids = {r.spec.tokens.begin(),
                              r.spec.tokens.begin() + r.spec.num_prompt_tokens},
         .block_ids = std::move(table),
         .num_computed_tokens = r.num_computed,
         .key = key});
  } else {
    step.cached_requests.push_back({.req_id = id,
                                    .resumed = true,
                                    .new_block_ids = std::move(table),
                                    .num_computed_tokens = r.num_computed,
                                    .key = key});
  }
  prefix_lookups_.push_back({.req_id = id, .longest_tokens = longest});
  r.started = true;
  r.status = RequestStatus::running;
  stats_.prefix_hits += hit >= 0 ? 1 : 0;
  make_scheduled(r, num_new, 0, *rb, step);
  budget -= num_new;
  return true;
}

void Scheduler::update(const model::Step& step) {
  MC_ASSERT(step.index == step_ - 1);
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    // The row schedule() made, unless a test edited the step (then by id).
    const bool same_row =
        keep_rows_ && b < scheduled_.size() && requests_[scheduled_[b]].spec.req_id == s.req_id;
    SchedRequest& r = requests_[same_row ? scheduled_[b] : index_.at(s.req_id)];
    if (r.status != RequestStatus::running) continue; // preempted later in the same step
    const std::int32_t committed =
        s.num_draft_tokens > 0 ? s.num_accepted_tokens : s.num_scheduled_tokens;
    r.num_computed += committed;
    if (r.num_computed >= r.num_tokens) r.num_tokens = r.num_computed + 1; // sampled
    MC_ASSERT(r.num_tokens <= static_cast<std::int32_t>(r.spec.tokens.size()));
    if (same_row)
      blocks_.cache_blocks(*scheduled_held_[b], r.num_computed, r.prefix_hashes, r.spec.tokens,
                           tail_tokens_);
    else
      blocks_.cache_blocks(s.req_id, r.num_computed, r.prefix_hashes, r.spec.tokens, tail_tokens_);
    if (r.num_tokens >= r.spec.max_len) finish(r);
  }
}

void Scheduler::finish(SchedRequest& r) {
  blocks_.free_request(r.spec.req_id);
  r.status = RequestStatus::finished;
  running_.erase(std::find(running_.begin(), running_.end(), index_.at(r.spec.req_id)));
  finished_pending_.push_back(r.spec.req_id);
  ++num_finished_;
  ++stats_.finished;
}

} // namespace mc::oracle::engine
