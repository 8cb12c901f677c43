#include "oracle/engine/scheduler.h"

#include "model/conv_history.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::oracle::engine {
namespace {

std::vector<model::TokenHash> prefix_hashes_of(const std::vector<std::int32_t>& tokens) {
  std::vector<model::TokenHash> h(tokens.size() + 1);
  h[0] = model::kEmptySequenceHash;
  for (std::size_t p = 0; p < tokens.size(); ++p)
    h[p + 1] = model::extend_hash(h[p], tokens[p]);
  return h;
}

} // namespace

Scheduler::Scheduler(const model::Layout& layout, const SchedulerOptions& options,
                     std::vector<RequestSpec> requests, std::uint64_t seed, Structures structures)
    : config_(layout.config), options_(options), keep_rows_(structures == Structures::fast),
      blocks_(layout.config, layout.num_groups(), static_cast<std::int32_t>(layout.spec.num_blocks),
              structures, options.hash_block_size),
      rng_(model::SplitMix64::from_seed(seed)), tail_tokens_(model::conv_history_rows_max(layout)) {
  for (RequestSpec& spec : requests) {
    SchedRequest r{.spec = std::move(spec)};
    r.prefix_hashes = prefix_hashes_of(r.spec.tokens);
    r.num_tokens = r.spec.num_prompt_tokens;
    MC_ASSERT(r.num_tokens >= 1 && r.spec.max_len > r.num_tokens);
    MC_ASSERT(static_cast<std::int32_t>(r.spec.tokens.size()) >= r.spec.max_len + 2);
    requests_.push_back(std::move(r));
  }
  std::stable_sort(requests_.begin(), requests_.end(), [](const auto& a, const auto& b) {
    return a.spec.arrival_step < b.spec.arrival_step;
  });
  for (std::size_t i = 0; i < requests_.size(); ++i)
    index_[requests_[i].spec.req_id] = i;
}

const SchedRequest& Scheduler::request(const std::string& req_id) const {
  const auto it = index_.find(req_id);
  MC_ASSERT(it != index_.end());
  return requests_[it->second];
}

std::int32_t Scheduler::planned_computed(const SchedRequest& r) const {
  const bool in_flight = r.in_flight.step >= 0 && !r.in_flight.stale;
  return r.num_computed + (in_flight ? r.in_flight.tokens : 0);
}

// A row in flight that reaches the end of the known tokens samples one more (a placeholder
// until its output arrives: vLLM's num_output_placeholders).
std::int32_t Scheduler::planned_tokens(const SchedRequest& r) const {
  const std::int32_t computed = planned_computed(r);
  return computed >= r.num_tokens ? computed + 1 : r.num_tokens;
}

// Where its prefill ends: the prompt, or after a preemption everything known but the token
// sampled last.
std::int32_t Scheduler::prefill_end(const SchedRequest& r) const {
  return std::max(r.spec.num_prompt_tokens, planned_tokens(r) - 1);
}

bool Scheduler::in_prefill(const SchedRequest& r) const {
  return planned_computed(r) < prefill_end(r);
}

// REFERENCE.md 3: keep cached states on block boundaries while prefilling (align mode). A
// chunk that ends before the last block boundary ends on one; none runs past the last boundary
// whose state is cached, which an EAGLE drafter moves one block back (its attention hit drops
// the last block). That back-off only adds a stop: a chunk past it but short of the last
// boundary still ends on a boundary, or the boundary it passes mid-chunk, registered from its
// block, would hold the state of the chunk's end (vLLM Scheduler._mamba_block_aligned_split at
// upstream 6a391a931a92: every chunk that ends before the prefill's end is block-aligned).
std::int32_t Scheduler::split_chunk(const SchedRequest& r, std::int32_t remaining,
                                    std::int32_t budget) const {
  const std::int32_t num_new = std::min(remaining, budget);
  if (config_.mode != model::CacheMode::align || !in_prefill(r)) return num_new;
  if (kv_ != nullptr)
    if (const auto kept = manager_split(r, num_new, budget)) return *kept;
  const std::int32_t B = config_.mamba_block_size;
  const std::int32_t computed = planned_computed(r);
  const std::int32_t num_tokens = planned_tokens(r);
  const std::int32_t last_boundary = num_tokens - num_tokens % B;
  std::int32_t last = last_boundary;
  if (options_.drafter_prunes_last_block) last = std::max(last - B, 0);
  const std::int32_t after = computed + num_new;
  std::int32_t end = after;
  if (computed < last && last < after)
    end = last;
  else if (after < last_boundary)
    end = after / B * B;
  // The stops vLLM adds, the earliest inside the chunk: after a partial-hash hit the chunk
  // starts mid-block and ends on that block's boundary (the column it writes in place then holds
  // a boundary state again); and the prompt's last hash boundary past the last cacheable block
  // boundary, where the chunk stops so that its partial tail can be cached.
  if (computed % B != 0) end = std::min(end, (computed / B + 1) * B);
  const std::int32_t h = blocks_.hash_unit();
  const std::int32_t tail = r.spec.num_prompt_tokens / h * h;
  if (h < B && last < tail && tail < r.spec.num_prompt_tokens && computed < tail)
    end = std::min(end, tail);
  return std::max(end - computed, 0);
}

std::optional<std::int32_t> Scheduler::manager_split(const SchedRequest& r, std::int32_t num_new,
                                                     std::int32_t budget) const {
  // vLLM splits an admission from its hit (num_new_local_computed_tokens), the request itself
  // counting none computed yet.
  const bool admitted_now = r.status == RequestStatus::waiting;
  const std::int32_t hit = admitted_now ? r.num_computed : 0;
  const std::optional<std::int32_t> kept =
      kv_->aligned_split(kv_request(r, admitted_now), num_new, hit);
  if (!kept) return std::nullopt;
  const std::int32_t start = planned_computed(r);
  if (*kept < 0 || *kept > num_new)
    throw KvManagerFault{fmt::format("_mamba_block_aligned_split kept {} of the {} tokens request "
                                     "{} could schedule from {} (0 .. {} expected)",
                                     *kept, num_new, r.spec.req_id, start, num_new)};
  // A split to nothing with the whole budget would never progress (class H).
  if (*kept == 0 && budget == options_.token_budget)
    throw KvManagerFault{fmt::format("_mamba_block_aligned_split kept none of the {} tokens "
                                     "request {} could schedule from {} with the whole budget of "
                                     "{}: its prefill never progresses",
                                     num_new, r.spec.req_id, start, budget)};
  return kept;
}

std::int32_t Scheduler::draw_drafts(const SchedRequest& r, std::int32_t budget) {
  const std::int32_t ns = config_.num_spec_tokens;
  if (ns == 0) return 0;
  std::int32_t d = rng_.chance(options_.full_drafts_per_million) ? ns : rng_.uniform32(0, ns - 1);
  d = std::min({d, budget - 1, r.spec.max_len - planned_tokens(r)});
  return std::max(d, 0);
}

// The placeholder drafts of a padded prompt tail (SchedulerOptions::pad_prompt_tails): num_spec
// of them, where the chunk is the prefill's last token alone and the budget and the request's
// length leave room for them; none otherwise.
std::int32_t Scheduler::placeholder_drafts(const SchedRequest& r, std::int32_t num_new,
                                           std::int32_t budget) const {
  const std::int32_t ns = config_.num_spec_tokens;
  if (!options_.pad_prompt_tails || ns == 0 || num_new != 1) return 0;
  if (planned_computed(r) + 1 != prefill_end(r)) return 0;
  if (budget < 1 + ns || r.spec.max_len - planned_tokens(r) < ns) return 0;
  return ns;
}

void Scheduler::make_scheduled(SchedRequest& r, std::int32_t num_new, std::int32_t num_draft,
                               RequestBlocks* held, model::Step& step) {
  const std::int32_t computed = planned_computed(r);
  planned_.requests.push_back(static_cast<std::size_t>(&r - requests_.data()));
  planned_.held.push_back(held);
  model::ScheduledRequest& s = reuse_spare(spare_scheduled_, step.scheduled);
  s.req_id = r.spec.req_id;
  s.key = static_cast<std::int32_t>(planned_.requests.back());
  s.num_scheduled_tokens = num_new;
  s.num_draft_tokens = num_draft;
  s.num_accepted_tokens = 1;
  if (num_draft > 0) {
    MC_ASSERT(num_new == 1 + num_draft);
    // A prompt tail's drafts are placeholders: the sampler rejects every one.
    s.num_accepted_tokens = in_prefill(r) ? 1 : rng_.uniform32(1, 1 + num_draft);
  }
  fill_tokens(r, computed, s);
  // finalize() corrects the start once the step in flight reported.
  r.planned = {.step = step.index, .start = computed, .tokens = num_new};
  stats_.request_steps += 1;
  stats_.tokens += num_new;
}

void Scheduler::fill_tokens(const SchedRequest& r, std::int32_t computed,
                            model::ScheduledRequest& s) const {
  const std::vector<std::int32_t>& truth = r.spec.tokens;
  const auto c = static_cast<std::size_t>(computed);
  const std::int32_t num_known = s.num_scheduled_tokens - s.num_draft_tokens;
  MC_ASSERT(c + static_cast<std::size_t>(s.num_scheduled_tokens) < truth.size());
  s.token_ids.assign(truth.begin() + static_cast<std::ptrdiff_t>(c),
                     truth.begin() + static_cast<std::ptrdiff_t>(c) + num_known);
  for (std::int32_t j = 0; j < s.num_draft_tokens; ++j) {
    const std::int32_t t = truth[c + 1 + static_cast<std::size_t>(j)];
    s.token_ids.push_back(j < s.num_accepted_tokens - 1 ? t : t + 1); // t + 1 != t: rejected
  }
}

void Scheduler::finalize(model::Step& step) {
  for (model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) continue;
    const SchedRequest& r = request(c.req_id);
    if (r.num_computed == c.num_computed_tokens) continue;
    // The step in flight rejected drafts this planning counted as accepted.
    MC_ASSERT(r.num_computed < c.num_computed_tokens);
    MC_ASSERT(r.planned.step == step.index);
    c.num_computed_tokens_optimistic = c.num_computed_tokens;
    c.num_computed_tokens = r.num_computed;
  }
  for (model::ScheduledRequest& s : step.scheduled) {
    SchedRequest& r = requests_[index_.at(s.req_id)];
    MC_ASSERT(r.planned.step == step.index && !r.planned.stale);
    if (r.planned.start == r.num_computed) continue;
    r.planned.start = r.num_computed;
    fill_tokens(r, r.num_computed, s);
  }
}

// Every block the step in flight can read or write: the tables of its rows as it ran (nothing
// has changed them since it was planned).
void Scheduler::mark_in_flight() {
  for (std::size_t b = 0; b < in_flight_.requests.size(); ++b) {
    SchedRequest& r = requests_[in_flight_.requests[b]];
    if (r.planned.step != in_flight_.step) continue; // its row was committed (a test's update)
    r.in_flight = r.planned;
    r.planned = {};
    if (r.status != RequestStatus::running || kv_) continue; // finished before; or not ours
    const RequestBlocks* held =
        blocks_.find(r.spec.req_id, static_cast<std::int32_t>(in_flight_.requests[b]));
    MC_ASSERT(held != nullptr);
    blocks_.mark_in_flight(*held, r.in_flight.start);
  }
}

model::Step Scheduler::schedule(model::Step spent) {
  for (model::ScheduledRequest& s : spent.scheduled)
    spare_scheduled_.push_back(std::move(s));
  for (model::CachedRequestData& c : spent.cached_requests)
    if (!c.resumed) spare_cached_.push_back(std::move(c)); // the shape schedule_running fills
  model::Step step{.index = step_};
  step.scheduled = std::move(spent.scheduled);
  step.scheduled.clear();
  step.cached_requests = std::move(spent.cached_requests);
  step.cached_requests.clear();
  step.finished_req_ids = std::move(finished_pending_);
  finished_pending_.clear();
  if (options_.async_scheduling) {
    std::swap(in_flight_, planned_);
    if (in_flight_.step >= 0) step.planned_during = in_flight_.step;
    mark_in_flight();
  }
  planned_.step = step.index;
  planned_.requests.clear();
  planned_.held.clear();
  if (kv_) kv_->new_step_starts();
  admit_arrivals();
  maybe_abort(step);
  const bool reset = rng_.chance(options_.reset_prefix_cache_per_million) || reset_requested_;
  reset_requested_ = false;
  if (reset && !running_.empty()) force_preempt_all(step);
  std::int32_t budget = options_.token_budget;
  prefix_lookups_.clear();
  const std::size_t preempted_before = step.preempted_req_ids.size();
  schedule_running(step, budget);
  // vLLM admits no waiting request in a step that preempted one (scheduler.py at 6a391a9, "if
  // not preempted_reqs"); a run through a manager under test follows it. The built-in model
  // keeps admitting (the victim first), so that its campaigns stay as they were drawn.
  if (kv_ == nullptr || step.preempted_req_ids.size() == preempted_before)
    schedule_waiting(step, budget);
  const bool work_left = !running_.empty() || !waiting_.empty();
  idle_steps_ = step.scheduled.empty() && work_left ? idle_steps_ + 1 : 0;
  // Liveness (class H): work left, nothing scheduled for steps. A manager under test that
  // refuses every allocation with its pool free is at fault, not the model.
  if (kv_ && idle_steps_ > 4)
    throw KvManagerFault{"no request could be scheduled for 5 steps with work left: every "
                         "allocate_slots or prefix hit was refused"};
  MC_ASSERT(idle_steps_ <= 4);
  step.block_copies = kv_ ? kv_->take_block_copies() : blocks_.take_copies(step.index);
  ++step_;
  ++stats_.steps;
  return step;
}

void Scheduler::admit_arrivals() {
  while (next_arrival_ < requests_.size() && requests_[next_arrival_].spec.arrival_step <= step_) {
    requests_[next_arrival_].status = RequestStatus::waiting;
    waiting_.push_back(next_arrival_++);
  }
}

void Scheduler::maybe_abort(model::Step& step) {
  if (!rng_.chance(options_.abort_per_million)) return;
  const std::size_t n = running_.size() + waiting_.size();
  if (n == 0) return;
  const auto pick = static_cast<std::size_t>(rng_.uniform(0, static_cast<std::int64_t>(n) - 1));
  std::size_t idx = 0;
  if (pick < running_.size()) {
    idx = running_[pick];
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(pick));
  } else {
    idx = waiting_[pick - running_.size()];
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(pick - running_.size()));
  }
  SchedRequest& r = requests_[idx];
  release(r);
  r.status = RequestStatus::finished;
  r.in_flight.stale = r.in_flight.step >= 0;
  r.planned.stale = r.planned.step >= 0;
  ++num_finished_;
  ++stats_.aborts;
  if (r.started) step.finished_req_ids.push_back(r.spec.req_id);
}

void Scheduler::force_preempt_all(model::Step& step) {
  const std::size_t preempted_before = step.preempted_req_ids.size();
  while (!running_.empty())
    preempt_last(step, stats_.forced_preemptions);
  // A manager under test that still holds a block (a free it defers) refuses the reset and
  // keeps its cache, as vLLM's BlockPool.reset_prefix_cache does: the requests were preempted
  // all the same. A reset that happened lists none of them: they come back resumed.
  if (kv_ && !kv_->reset_prefix_cache()) return;
  if (!kv_) blocks_.reset_cache();
  step.preempted_req_ids.resize(preempted_before);
  step.reset_prefix_cache = true;
  ++stats_.resets;
}

void Scheduler::preempt_last(model::Step& step, std::int64_t& counter) {
  const std::size_t idx = running_.back();
  SchedRequest& r = requests_[idx];
  release(r);
  r.num_computed = 0;
  r.status = RequestStatus::waiting;
  r.in_flight.stale = r.in_flight.step >= 0;
  r.planned.stale = r.planned.step >= 0;
  running_.pop_back();
  waiting_.push_front(idx);
  step.preempted_req_ids.push_back(r.spec.req_id);
  ++counter;
}

void Scheduler::release(SchedRequest& r) {
  if (kv_) {
    KvRequest q = kv_request(r, false);
    q.num_in_flight = (r.in_flight.step >= 0 ? r.in_flight.tokens : 0) +
                      (r.planned.step >= 0 ? r.planned.tokens : 0);
    kv_->free(q);
  } else
    blocks_.free_request(r.spec.req_id);
}

// vLLM's counters (request.py): num_computed_tokens counts the step in flight as accepted,
// num_in_flight_tokens its scheduled tokens, num_output_placeholders the outputs it has not
// delivered (the decode's 1 + drafts, or 1 for the chunk that ends the prompt).
KvRequest Scheduler::kv_request(const SchedRequest& r, bool fresh) const {
  const bool in_flight = r.in_flight.step >= 0 && !r.in_flight.stale;
  const std::int32_t computed = fresh ? 0 : planned_computed(r);
  return {.id = r.spec.req_id,
          .tokens = std::span(r.spec.tokens).first(static_cast<std::size_t>(r.num_tokens)),
          .num_prompt = r.spec.num_prompt_tokens,
          .num_computed = computed,
          .num_in_flight = in_flight && !fresh ? r.in_flight.tokens : 0,
          .placeholders = fresh ? 0 : std::max(0, computed + 1 - r.num_tokens)};
}

} // namespace mc::oracle::engine
