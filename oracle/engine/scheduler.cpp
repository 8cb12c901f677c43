#include "oracle/engine/scheduler.h"

#include "model/conv_history.h"
#include "model/errors.h"

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
              options.async_frees, structures),
      rng_(model::SplitMix64::from_seed(seed)), tail_tokens_(model::conv_history_rows_max(layout)) {
  for (RequestSpec& spec : requests) {
    SchedRequest r{.spec = std::move(spec)};
    r.prefix_hashes = prefix_hashes_of(r.spec.tokens);
    r.num_tokens = r.spec.num_prompt_tokens;
    MC_ASSERT(r.num_tokens >= 1 && r.spec.max_len > r.num_tokens);
    MC_ASSERT(static_cast<std::int32_t>(r.spec.tokens.size()) >= r.spec.max_len + 2);
    index_.emplace(r.spec.req_id, requests_.size());
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

bool Scheduler::in_prefill(const SchedRequest& r) const {
  return r.num_computed < std::max(r.spec.num_prompt_tokens, r.num_tokens - 1);
}

// REFERENCE.md 3: keep cached states on block boundaries while prefilling (align mode).
std::int32_t Scheduler::split_chunk(const SchedRequest& r, std::int32_t num_new) const {
  if (config_.mode != model::CacheMode::align || !in_prefill(r)) return num_new;
  const std::int32_t B = config_.mamba_block_size;
  std::int32_t last = r.num_tokens - r.num_tokens % B;
  if (options_.drafter_prunes_last_block) last = std::max(last - B, 0);
  const std::int32_t after = r.num_computed + num_new;
  if (after < last) return num_new / B * B;
  if (r.num_computed < last && last < after) return last - r.num_computed;
  return num_new;
}

std::int32_t Scheduler::draw_drafts(const SchedRequest& r, std::int32_t budget) {
  const std::int32_t ns = config_.num_spec_tokens;
  if (ns == 0) return 0;
  std::int32_t d = rng_.chance(options_.full_drafts_per_million) ? ns : rng_.uniform32(0, ns - 1);
  d = std::min({d, budget - 1, r.spec.max_len - r.num_tokens});
  // All mode: a decode carries every draft or none. Its record of the last scheduled block
  // survives only a full decode (REFERENCE.md 3), and the draft prefixes' states of a shorter
  // one would be read nowhere (model/FORWARD.md).
  if (config_.mode == model::CacheMode::all && d < ns) return 0;
  return std::max(d, 0);
}

void Scheduler::make_scheduled(const SchedRequest& r, std::int32_t num_new, std::int32_t num_draft,
                               RequestBlocks& held, model::Step& step) {
  const std::vector<std::int32_t>& truth = r.spec.tokens;
  const auto c = static_cast<std::size_t>(r.num_computed);
  scheduled_.push_back(static_cast<std::size_t>(&r - requests_.data()));
  scheduled_held_.push_back(&held);
  if (spare_scheduled_.empty()) spare_scheduled_.emplace_back();
  step.scheduled.push_back(std::move(spare_scheduled_.back()));
  spare_scheduled_.pop_back();
  model::ScheduledRequest& s = step.scheduled.back();
  s.req_id = r.spec.req_id;
  s.key = static_cast<std::int32_t>(scheduled_.back());
  s.num_scheduled_tokens = num_new;
  s.num_draft_tokens = num_draft;
  s.num_accepted_tokens = 1;
  s.token_ids.assign(truth.begin() + static_cast<std::ptrdiff_t>(c),
                     truth.begin() + static_cast<std::ptrdiff_t>(c) + (num_new - num_draft));
  if (num_draft > 0) {
    MC_ASSERT(num_new == 1 + num_draft);
    s.num_accepted_tokens = rng_.uniform32(1, 1 + num_draft);
    for (std::int32_t j = 0; j < num_draft; ++j) {
      const std::int32_t t = truth[c + 1 + static_cast<std::size_t>(j)];
      s.token_ids.push_back(j < s.num_accepted_tokens - 1 ? t : t + 1); // t + 1 != t: rejected
    }
  }
  stats_.request_steps += 1;
  stats_.tokens += num_new;
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
  if (options_.async_frees) blocks_.release_deferred();
  admit_arrivals();
  maybe_abort(step);
  const bool reset = rng_.chance(options_.reset_prefix_cache_per_million) || reset_requested_;
  reset_requested_ = false;
  if (reset && !running_.empty()) force_preempt_all(step);
  std::int32_t budget = options_.token_budget;
  scheduled_.clear();
  scheduled_held_.clear();
  prefix_lookups_.clear();
  schedule_running(step, budget);
  schedule_waiting(step, budget);
  const bool work_left = !running_.empty() || !waiting_.empty();
  idle_steps_ = step.scheduled.empty() && work_left ? idle_steps_ + 1 : 0;
  MC_ASSERT(idle_steps_ <= 4); // liveness (class H): work left, nothing scheduled for steps
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
  blocks_.free_request(r.spec.req_id);
  r.status = RequestStatus::finished;
  ++num_finished_;
  ++stats_.aborts;
  if (r.started) step.finished_req_ids.push_back(r.spec.req_id);
}

void Scheduler::force_preempt_all(model::Step& step) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    SchedRequest& r = requests_[*it];
    blocks_.free_request(r.spec.req_id);
    r.num_computed = 0;
    r.status = RequestStatus::waiting;
    waiting_.push_front(*it);
    ++stats_.forced_preemptions;
  }
  running_.clear();
  blocks_.reset_cache();
  step.reset_prefix_cache = true; // not listed as preempted: they come back resumed
  ++stats_.resets;
}

void Scheduler::preempt(std::size_t running_index, model::Step& step) {
  const std::size_t idx = running_[running_index];
  SchedRequest& r = requests_[idx];
  blocks_.free_request(r.spec.req_id);
  r.num_computed = 0;
  r.status = RequestStatus::waiting;
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  waiting_.push_front(idx);
  step.preempted_req_ids.push_back(r.spec.req_id);
  ++stats_.preemptions;
}

} // namespace mc::oracle::engine
