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
    // Async: the row in flight may finish it (its drafts taken as accepted reach the end).
    if (r.in_flight.step >= 0 && planned_tokens(r) >= r.spec.max_len) {
      ++i;
      continue;
    }
    const std::int32_t computed = planned_computed(r);
    std::int32_t num_draft = 0;
    std::int32_t num_new = 0;
    if (in_prefill(r)) {
      num_new = split_chunk(r, planned_tokens(r) - computed, budget);
      num_draft = placeholder_drafts(r, num_new, budget);
      num_new += num_draft;
    } else {
      MC_ASSERT(computed == planned_tokens(r) - 1);
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
    if (kv_) {
      if (!allocate_running(i, num_new, step, reuse_spare(spare_cached_, step.cached_requests))) {
        step.cached_requests.pop_back();
        break;
      }
      make_scheduled(r, num_new, num_draft, nullptr, step);
      budget -= num_new;
      ++i;
      continue;
    }
    // A running request holds its tables; preempting others below leaves them in place.
    RequestBlocks* held = blocks_.find_held(id, key);
    MC_ASSERT(held != nullptr);
    bool self_preempted = false;
    if (options_.async_scheduling) {
      // Blocks held back come back when the step in flight completes: preempt only while even
      // they would not be enough, then wait a step for them rather than preempt more. The
      // request's own stale block is dropped only once it is scheduled (a trace shows the
      // frees of scheduled rows alone).
      while (!blocks_.can_allocate(*held, computed + num_new) &&
             !blocks_.can_allocate_after_release(*held, computed + num_new)) {
        self_preempted = running_.size() - 1 == i;
        preempt_last(step, stats_.preemptions);
        if (self_preempted) break;
      }
      if (self_preempted) break;
      if (!blocks_.can_allocate(*held, computed + num_new)) {
        ++i;
        continue;
      }
      // Stale blocks go by the tokens committed, never by the optimistic count: the step in
      // flight and this one may still save a boundary state that count has passed (vLLM
      // frees from processed_computed_tokens, the count less the tokens in flight).
      blocks_.remove_skipped(*held, r.num_computed);
    } else {
      blocks_.remove_skipped(*held, computed);
      while (!blocks_.can_allocate(*held, computed + num_new)) {
        self_preempted = running_.size() - 1 == i;
        preempt_last(step, stats_.preemptions);
        if (self_preempted) break;
      }
      if (self_preempted) break;
    }
    model::CachedRequestData& cached = reuse_spare(spare_cached_, step.cached_requests);
    cached.req_id = id;
    cached.key = key;
    cached.resumed = false;
    cached.num_computed_tokens = computed;
    cached.num_computed_tokens_optimistic.reset();
    blocks_.allocate(*held, computed + num_new, cached.new_block_ids);
    make_scheduled(r, num_new, num_draft, held, step);
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
  // Async: preempted while its row is in flight; it resumes once that row reported.
  if (r.in_flight.step >= 0) return false;
  if (kv_) return admit_external(r, step, budget);
  // Hits end on multiples of the hash unit (B, or its divisor with partial-hash hits).
  const std::int32_t unit = blocks_.hash_unit();
  std::vector<model::TokenHash> boundaries;
  for (std::int32_t p = 0; (p + 1) * unit <= r.num_tokens - 1; ++p)
    boundaries.push_back(r.prefix_hashes[static_cast<std::size_t>((p + 1) * unit)]);
  const std::int32_t hit =
      blocks_.find_cache_hit(boundaries, static_cast<std::int32_t>(boundaries.size()));
  if (hit == -2) return false; // its hit is a copy this step makes: it waits a step
  const std::int32_t longest = longest_prefix_hit(blocks_.pools(), config_.mamba_block_size,
                                                  r.prefix_hashes, r.num_tokens, unit);
  r.num_computed = hit >= 0 ? (hit + 1) * unit : 0;
  const std::int32_t num_new = split_chunk(r, r.num_tokens - r.num_computed, budget);
  const std::string& id = r.spec.req_id;
  if (num_new > 0 && hit >= 0)
    blocks_.start_with_hit(id, r.num_computed, boundaries[static_cast<std::size_t>(hit)]);
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
  prefix_lookups_.push_back({.req_id = id, .longest_tokens = longest});
  start_running(r, std::move(table), {}, num_new, rb, step, budget);
  return true;
}

void Scheduler::start_running(SchedRequest& r, model::GroupBlockIds table,
                              model::GroupBlockIds attention_table, std::int32_t num_new,
                              RequestBlocks* held, model::Step& step, std::int32_t& budget) {
  const auto key = static_cast<std::int32_t>(&r - requests_.data());
  if (!r.started) {
    step.new_requests.push_back(
        {.req_id = r.spec.req_id,
         .prompt_token_ids = {r.spec.tokens.begin(),
                              r.spec.tokens.begin() + r.spec.num_prompt_tokens},
         .block_ids = std::move(table),
         .num_computed_tokens = r.num_computed,
         .key = key,
         .attention_block_ids = std::move(attention_table)});
  } else {
    step.cached_requests.push_back({.req_id = r.spec.req_id,
                                    .resumed = true,
                                    .new_block_ids = std::move(table),
                                    .num_computed_tokens = r.num_computed,
                                    .key = key,
                                    .attention_block_ids = std::move(attention_table)});
  }
  r.started = true;
  r.status = RequestStatus::running;
  stats_.prefix_hits += r.num_computed > 0 ? 1 : 0;
  make_scheduled(r, num_new, 0, held, step);
  budget -= num_new;
}

void Scheduler::update(const model::Step& step) {
  // Async: the step in flight is the one planned before the last; its blocks are free to
  // take again once it completed.
  const bool async_rows = in_flight_.step == step.index;
  MC_ASSERT(async_rows || (planned_.step == step.index && step.index == step_ - 1));
  const Rows& rows = async_rows ? in_flight_ : planned_;
  if (async_rows && kv_) kv_->output_processed();
  if (async_rows) blocks_.release_in_flight();
  blocks_.release_copies(step.index); // the step ran its copies
  for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
    const model::ScheduledRequest& s = step.scheduled[b];
    // The row schedule() made, unless a test edited the step (then by id).
    const bool same_row = keep_rows_ && b < rows.requests.size() &&
                          requests_[rows.requests[b]].spec.req_id == s.req_id;
    SchedRequest& r = requests_[same_row ? rows.requests[b] : index_.at(s.req_id)];
    SchedRequest::PendingRow& row = async_rows ? r.in_flight : r.planned;
    if (row.step != step.index) continue; // not this row's request any more
    const std::int32_t committed =
        s.num_draft_tokens > 0 ? s.num_accepted_tokens : s.num_scheduled_tokens;
    const std::int32_t end = row.start + committed;
    const bool stale = row.stale;
    row = {};
    if (end >= r.num_tokens) r.num_tokens = end + 1; // sampled (kept by a request preempted since)
    MC_ASSERT(r.num_tokens <= static_cast<std::int32_t>(r.spec.tokens.size()));
    if (r.status == RequestStatus::finished) continue; // aborted while its row ran
    if (stale) {
      if (r.num_tokens >= r.spec.max_len) finish(r);
      continue;
    }
    MC_ASSERT(r.status == RequestStatus::running && r.num_computed == end - committed);
    r.num_computed = end;
    if (kv_) {
      // vLLM's async scheduler registers what the output verified: num_computed_tokens less
      // num_output_placeholders (async_scheduler.py); the synchronous one registers nothing.
      if (async_rows) {
        const KvRequest q = kv_request(r, false);
        kv_->cache_blocks(q, q.num_computed - q.placeholders);
      }
    } else {
      // A partial tail only from a row without drafts (a padded prompt tail's drafts stay in
      // its conv window), and when no later row of r is planned yet: that row overwrites it.
      const bool partial = s.num_draft_tokens == 0 && r.planned.step < 0;
      const std::int32_t num_prompt = partial ? r.spec.num_prompt_tokens : 0;
      if (RequestBlocks* held = same_row ? rows.held[b] : blocks_.find_held(s.req_id))
        blocks_.cache_blocks(*held, r.num_computed, r.prefix_hashes, r.spec.tokens, tail_tokens_,
                             num_prompt);
    }
    if (r.num_tokens >= r.spec.max_len) finish(r);
  }
}

// A running request done, or one preempted while its row was in flight whose row sampled its
// last token (its blocks freed at the preemption).
void Scheduler::finish(SchedRequest& r) {
  const std::size_t idx = index_.at(r.spec.req_id);
  if (r.status == RequestStatus::waiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), idx));
  } else {
    release(r);
    running_.erase(std::find(running_.begin(), running_.end(), idx));
  }
  r.status = RequestStatus::finished;
  finished_pending_.push_back(r.spec.req_id);
  ++num_finished_;
  ++stats_.finished;
}

// vLLM's running loop: allocate_slots, and on None preempt the last running request and retry,
// until it fits or the request itself was the last (scheduler.py _schedule_running).
bool Scheduler::allocate_running(std::size_t i, std::int32_t num_new, model::Step& step,
                                 model::CachedRequestData& cached) {
  SchedRequest& r = requests_[running_[i]];
  while (!kv_->allocate_slots(kv_request(r, false), num_new, 0, lookahead_, allocation_)) {
    const bool self = running_.size() - 1 == i;
    preempt_last(step, stats_.preemptions);
    if (self) return false;
  }
  cached.req_id = r.spec.req_id;
  cached.key = static_cast<std::int32_t>(running_[i]);
  cached.resumed = false;
  cached.num_computed_tokens = planned_computed(r);
  cached.num_computed_tokens_optimistic.reset();
  cached.new_block_ids = allocation_.appended;
  cached.attention_block_ids = allocation_.attention_appended;
  cached.held_block_ids = allocation_.held;
  return true;
}

// vLLM's waiting loop for one request: the prefix hit, the aligned chunk, allocate_slots with
// the hit; None admits nothing more this step.
bool Scheduler::admit_external(SchedRequest& r, model::Step& step, std::int32_t& budget) {
  const std::int32_t hit = kv_->get_computed_blocks(kv_request(r, true));
  if (hit < 0 || hit >= r.num_tokens)
    throw KvManagerFault{fmt::format("get_computed_blocks offered {} computed tokens to request "
                                     "{} of {} tokens (0 .. {} expected)",
                                     hit, r.spec.req_id, r.num_tokens, r.num_tokens - 1)};
  r.num_computed = hit;
  const std::int32_t num_new = split_chunk(r, r.num_tokens - hit, budget);
  if (num_new == 0 ||
      !kv_->allocate_slots(kv_request(r, true), num_new, hit, lookahead_, allocation_)) {
    r.num_computed = 0;
    return false;
  }
  start_running(r, allocation_.held, allocation_.attention_held, num_new, nullptr, step, budget);
  return true;
}

} // namespace mc::oracle::engine
