// StepChecker: counts, block ids, drafts and acceptance, and request lifetimes, step by step.
#include "scenarios/trace_rules.h"

#include "model/errors.h"
#include "model/json_field.h"
#include "scenarios/trace.h"

#include <fmt/format.h>

#include <functional>
#include <unordered_set>

namespace mc::scenarios {

using model::fail_field;
namespace {

std::string at(std::string_view list, std::size_t i, std::string_view member) {
  return fmt::format("{}[{}].{}", list, i, member);
}

// `path(member)` spells out the path of a member of the entry holding the id; only a broken
// rule calls it.
template <typename Path> void check_req_id(const std::string& id, const Path& path) {
  if (id.empty()) fail_field(path("req_id"), "an empty request id");
  if (id.size() > kReqIdBytesMax)
    fail_field(path("req_id"), "{} bytes, at most {}", id.size(), kReqIdBytesMax);
  for (const char c : id)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      fail_field(path("req_id"), "a control character in the request id");
}

template <typename Path> void check_tokens(const std::vector<std::int32_t>& ids, const Path& path) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0) fail_field(fmt::format("{}[{}]", path(), i), "negative token id {}", ids[i]);
}

// Ids of a list that must be live before the step (preempted, finished), each at most once.
template <typename Live>
void check_known_ids(const std::vector<model::RequestId>& ids, std::string_view list,
                     const Live& live) {
  std::unordered_set<std::string_view> seen;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto path = [&](std::string_view) { return fmt::format("{}[{}]", list, i); };
    check_req_id(ids[i], path);
    if (!live.contains(ids[i]))
      fail_field(path({}), "request '{}' is not known (never arrived, or already finished)",
                 ids[i]);
    if (!seen.insert(ids[i]).second) fail_field(path({}), "request '{}' listed twice", ids[i]);
  }
}

} // namespace

StepChecker::StepChecker(const TraceHeader& header)
    : config_(header.config), pool_sizes_(header.block_pool_sizes), async_(header.async_scheduling),
      hit_unit_(header.contract.hash_block_size == 0 ? header.config.mamba_block_size
                                                     : header.contract.hash_block_size) {
  MC_ASSERT(!pool_sizes_.empty());
  for (const std::int32_t size : pool_sizes_)
    MC_ASSERT(size >= 1);
}

void StepChecker::check(const model::Step& step) {
  if (step.index < 0 || step.index > kStepIndexMax)
    fail_field("index", "{} is out of range 0..{}", step.index, kStepIndexMax);
  if (last_index_ && step.index <= *last_index_)
    fail_field("index", "{} after step {}: step indices must increase", step.index, *last_index_);
  if (step.new_requests.size() > kRequestsPerStepMax)
    fail_field("new_requests", "{} entries, at most {}", step.new_requests.size(),
               kRequestsPerStepMax);
  if (live_.size() + step.new_requests.size() > kLiveRequestsMax)
    fail_field("new_requests", "more than {} live requests", kLiveRequestsMax);
  check_planned(step);
  check_copies(step);
  StepRequests in_step;
  check_new(step, in_step);
  check_cached(step, in_step);
  check_scheduled(step, in_step);
  check_departures(step, in_step);
  commit(step);
}

// Copies come only with partial-hash hits; each of blocks of its group's pool, and no block
// both a source and a destination in one step (the order of the copies then does not matter).
void StepChecker::check_copies(const model::Step& step) const {
  if (step.block_copies.empty()) return;
  if (hit_unit_ == config_.mamba_block_size)
    fail_field("block_copies", "copies come only with partial-hash hits (the header's scheduler "
                               "hash_block_size below mamba_block_size)");
  for (std::size_t i = 0; i < step.block_copies.size(); ++i) {
    const model::BlockCopy& c = step.block_copies[i];
    const std::string at = fmt::format("block_copies[{}]", i);
    if (c.group < 0 || static_cast<std::size_t>(c.group) >= pool_sizes_.size())
      fail_field(at, "group {}: the layout has {} groups", c.group, pool_sizes_.size());
    const std::int32_t size = pool_sizes_[static_cast<std::size_t>(c.group)];
    for (const std::int32_t block : {c.src, c.dst})
      if (block < 1 || block >= size)
        fail_field(at, "block {} is not a block of group {}'s pool (1..{})", block, c.group,
                   size - 1);
    for (const model::BlockCopy& o : step.block_copies)
      if (o.group == c.group && o.src == c.dst)
        fail_field(at, "block {} of group {} is both a destination and a source", c.dst, c.group);
  }
}

// Async scheduling (FORMAT.md): one step in flight, the one right before; an optimistic count
// only where a step was in flight, on a running request, above the true count by at most the
// drafts of one row.
void StepChecker::check_planned(const model::Step& step) const {
  if (step.planned_during >= 0) {
    if (!async_)
      fail_field("planned_during",
                 "a step planned during another needs a header with async_scheduling: true");
    if (!last_index_ || step.planned_during != *last_index_)
      fail_field("planned_during",
                 "{}: one step is in flight while the next is planned, the step before it{}",
                 step.planned_during,
                 last_index_ ? fmt::format(" ({})", *last_index_) : std::string(" (none)"));
  }
  for (std::size_t i = 0; i < step.cached_requests.size(); ++i) {
    const model::CachedRequestData& r = step.cached_requests[i];
    if (!r.num_computed_tokens_optimistic) continue;
    const std::string path = at("cached_requests", i, "num_computed_tokens_optimistic");
    if (step.planned_during < 0)
      fail_field(path, "an optimistic count needs planned_during (a step in flight)");
    if (r.resumed)
      fail_field(path, "a resumed request starts from its prefix hit, never from a count "
                       "in flight");
    const std::int64_t over =
        std::int64_t{*r.num_computed_tokens_optimistic} - r.num_computed_tokens;
    if (over < 1 || over > config_.num_spec_tokens)
      fail_field(path,
                 "{} is not num_computed_tokens {} plus 1..num_spec_tokens {} rejected drafts "
                 "(an equal count is written by leaving the field out)",
                 *r.num_computed_tokens_optimistic, r.num_computed_tokens, config_.num_spec_tokens);
  }
}

void StepChecker::check_blocks(const model::GroupBlockIds& ids,
                               const std::function<std::string()>& path) const {
  if (ids.size() != pool_sizes_.size())
    fail_field(path(), "{} groups, the layout has {}", ids.size(), pool_sizes_.size());
  for (std::size_t g = 0; g < ids.size(); ++g) {
    if (ids[g].size() > kBlockIdsPerRowMax)
      fail_field(fmt::format("{}[{}]", path(), g), "{} block ids, at most {}", ids[g].size(),
                 kBlockIdsPerRowMax);
    for (std::size_t i = 0; i < ids[g].size(); ++i) {
      const std::int32_t id = ids[g][i];
      if (id < 0 || id >= pool_sizes_[g])
        fail_field(fmt::format("{}[{}][{}]", path(), g, i),
                   "block id {} is outside group {}'s pool 0..{}{}", id, g, pool_sizes_[g] - 1,
                   id == -1 ? " (-1 pads belong to the runner's table, never to a trace)" : "");
    }
  }
}

void StepChecker::check_new(const model::Step& step, StepRequests& in_step) const {
  for (std::size_t i = 0; i < step.new_requests.size(); ++i) {
    const model::NewRequestData& r = step.new_requests[i];
    // Paths are spelt out only when a rule is broken (this runs for every line read).
    const auto path = [i](std::string_view member) { return at("new_requests", i, member); };
    check_req_id(r.req_id, path);
    if (const auto it = live_.find(r.req_id); it != live_.end())
      fail_field(path("req_id"), "request '{}' already exists (arrived at step {})", r.req_id,
                 it->second.arrival_step);
    if (!in_step.emplace(r.req_id, InStep{.role = Role::arrived, .list_index = i}).second)
      fail_field(path("req_id"), "request '{}' arrives twice in this step", r.req_id);
    const auto prompt_len = static_cast<std::int64_t>(r.prompt_token_ids.size());
    if (prompt_len < 1 || prompt_len > kPromptTokensMax)
      fail_field(path("prompt_token_ids"), "{} tokens, expected 1..{}", prompt_len,
                 kPromptTokensMax);
    check_tokens(r.prompt_token_ids, [&] { return path("prompt_token_ids"); });
    if (r.num_computed_tokens < 0 || r.num_computed_tokens >= prompt_len)
      fail_field(path("num_computed_tokens"),
                 "{} is outside 0..{} (a prefix hit leaves one prompt token)",
                 r.num_computed_tokens, prompt_len - 1);
    if (r.num_computed_tokens % hit_unit_ != 0)
      fail_field(path("num_computed_tokens"),
                 "{} is not a multiple of {} {} (a prefix hit ends on a {})", r.num_computed_tokens,
                 hit_unit(), hit_unit_, hit_boundary());
    if (step.reset_prefix_cache && r.num_computed_tokens > 0)
      fail_field(path("num_computed_tokens"),
                 "{} tokens from a prefix hit in the step that emptied the prefix cache",
                 r.num_computed_tokens);
    check_blocks(r.block_ids, [&] { return path("block_ids"); });
  }
}

void StepChecker::check_cached(const model::Step& step, StepRequests& in_step) const {
  if (step.cached_requests.size() > kRequestsPerStepMax)
    fail_field("cached_requests", "{} entries, at most {}", step.cached_requests.size(),
               kRequestsPerStepMax);
  const std::unordered_set<std::string_view> preempted_now(step.preempted_req_ids.begin(),
                                                           step.preempted_req_ids.end());
  for (std::size_t i = 0; i < step.cached_requests.size(); ++i) {
    const model::CachedRequestData& r = step.cached_requests[i];
    const auto path = [i](std::string_view member) { return at("cached_requests", i, member); };
    check_req_id(r.req_id, path);
    const auto it = live_.find(r.req_id);
    if (it == live_.end())
      fail_field(path("req_id"), "request '{}' is not known (never arrived, or already finished)",
                 r.req_id);
    if (!in_step.emplace(r.req_id, InStep{.role = Role::cached, .list_index = i}).second)
      fail_field(path("req_id"), "request '{}' is listed twice in this step", r.req_id);
    if (!r.resumed && (it->second.must_resume || preempted_now.contains(r.req_id)))
      fail_field(path("resumed"),
                 "request '{}' was preempted and must come back resumed (a whole new table)",
                 r.req_id);
    if (!r.resumed && step.reset_prefix_cache)
      fail_field(path("resumed"),
                 "reset_prefix_cache preempts every running request: '{}' must be resumed",
                 r.req_id);
    if (r.num_computed_tokens < 0)
      fail_field(path("num_computed_tokens"), "negative count {}", r.num_computed_tokens);
    if (r.resumed && r.num_computed_tokens % hit_unit_ != 0)
      fail_field(path("num_computed_tokens"),
                 "a resumed request restarts from a prefix hit: {} is not a multiple of {} {}",
                 r.num_computed_tokens, hit_unit(), hit_unit_);
    if (r.resumed && step.reset_prefix_cache && r.num_computed_tokens > 0)
      fail_field(path("num_computed_tokens"),
                 "{} tokens from a prefix hit in the step that emptied the prefix cache",
                 r.num_computed_tokens);
    check_blocks(r.new_block_ids, [&] { return path("new_block_ids"); });
  }
}

void StepChecker::check_row(const model::ScheduledRequest& row, std::size_t index) const {
  const auto path = [index](std::string_view member) { return at("scheduled", index, member); };
  if (row.num_scheduled_tokens < 1 || row.num_scheduled_tokens > kScheduledTokensMax)
    fail_field(path("num_scheduled_tokens"), "{} is outside 1..{}", row.num_scheduled_tokens,
               kScheduledTokensMax);
  if (row.num_draft_tokens < 0)
    fail_field(path("num_draft_tokens"), "negative count {}", row.num_draft_tokens);
  if (row.num_draft_tokens > config_.num_spec_tokens)
    fail_field(path("num_draft_tokens"), "{} drafts, more than num_spec_tokens {}",
               row.num_draft_tokens, config_.num_spec_tokens);
  if (row.num_draft_tokens >= row.num_scheduled_tokens)
    fail_field(path("num_draft_tokens"),
               "{} drafts in {} scheduled tokens (the first scheduled token is never a draft)",
               row.num_draft_tokens, row.num_scheduled_tokens);
  if (row.num_draft_tokens > 0 && row.num_scheduled_tokens != 1 + row.num_draft_tokens)
    fail_field(path("num_draft_tokens"),
               "{} drafts in a row of {} tokens: drafts come only in a decode row (1 + drafts "
               "tokens), never in a prefill chunk",
               row.num_draft_tokens, row.num_scheduled_tokens);
  if (row.token_ids.size() != static_cast<std::size_t>(row.num_scheduled_tokens))
    fail_field(path("token_ids"), "{} token ids for {} scheduled tokens", row.token_ids.size(),
               row.num_scheduled_tokens);
  check_tokens(row.token_ids, [&] { return path("token_ids"); });
  if (row.num_accepted_tokens < 1 || row.num_accepted_tokens > 1 + row.num_draft_tokens)
    fail_field(path("num_accepted_tokens"), "{} is outside 1..{} (1 + num_draft_tokens)",
               row.num_accepted_tokens, 1 + row.num_draft_tokens);
}

// Counts of a row against its request's entry (new or cached) in the same step.
void StepChecker::check_row_against_entry(const model::Step& step,
                                          const model::ScheduledRequest& row, std::size_t index,
                                          const InStep& entry) const {
  const auto path = [index](std::string_view member) { return at("scheduled", index, member); };
  const bool arrived = entry.role == Role::arrived;
  const std::int64_t computed = arrived
                                    ? step.new_requests[entry.list_index].num_computed_tokens
                                    : step.cached_requests[entry.list_index].num_computed_tokens;
  const std::int64_t end = computed + row.num_scheduled_tokens;
  if (end > kSequenceTokensMax)
    fail_field(path("num_scheduled_tokens"),
               "{} computed + {} scheduled tokens is past the longest sequence {}", computed,
               row.num_scheduled_tokens, kSequenceTokensMax);
  if (arrived) {
    // Its drafts may go past the prompt: vLLM pads a 1-token prompt tail to 1 + num_spec
    // tokens with placeholder drafts (pad_spec_decode), which are always rejected.
    const auto prompt_len =
        static_cast<std::int64_t>(step.new_requests[entry.list_index].prompt_token_ids.size());
    const std::int64_t known_end = end - row.num_draft_tokens;
    if (known_end > prompt_len)
      fail_field(path("num_scheduled_tokens"),
                 "a new request schedules positions {}..{}, past its {}-token prompt", computed,
                 known_end - 1, prompt_len);
  }
}

void StepChecker::check_scheduled(const model::Step& step, StepRequests& in_step) const {
  if (step.scheduled.size() > kRequestsPerStepMax)
    fail_field("scheduled", "{} entries, at most {}", step.scheduled.size(), kRequestsPerStepMax);
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    const model::ScheduledRequest& row = step.scheduled[i];
    const auto path = [i](std::string_view member) { return at("scheduled", i, member); };
    check_req_id(row.req_id, path);
    const auto it = in_step.find(row.req_id);
    if (it == in_step.end() && !live_.contains(row.req_id))
      fail_field(path("req_id"),
                 "request '{}' is scheduled before it arrived (not new in this step and not "
                 "known)",
                 row.req_id);
    if (it == in_step.end())
      fail_field(path("req_id"),
                 "request '{}' is scheduled but not among this step's cached_requests", row.req_id);
    if (it->second.scheduled)
      fail_field(path("req_id"), "request '{}' is scheduled twice", row.req_id);
    it->second.scheduled = true;
    check_row(row, i);
    check_row_against_entry(step, row, i, it->second);
  }
  for (const auto& [id, entry] : in_step) {
    if (entry.scheduled) continue;
    const char* list = entry.role == Role::arrived ? "new_requests" : "cached_requests";
    fail_field(at(list, entry.list_index, "req_id"),
               "request '{}' is not scheduled in this step (every new and cached request is)", id);
  }
}

void StepChecker::check_departures(const model::Step& step, const StepRequests& in_step) const {
  check_known_ids(step.preempted_req_ids, "preempted_req_ids", live_);
  check_known_ids(step.finished_req_ids, "finished_req_ids", live_);
  for (std::size_t i = 0; i < step.finished_req_ids.size(); ++i)
    if (in_step.contains(step.finished_req_ids[i]))
      fail_field(fmt::format("finished_req_ids[{}]", i),
                 "request '{}' finished before this step but is scheduled in it",
                 step.finished_req_ids[i]);
}

// In a step, preemptions (and a reset's forced ones) come before resumes: a scheduler may
// take a request it just preempted back from the waiting queue in the same step.
void StepChecker::commit(const model::Step& step) {
  if (step.reset_prefix_cache)
    for (auto& [id, live] : live_)
      live.must_resume = true;
  for (const model::RequestId& id : step.preempted_req_ids)
    live_.at(id).must_resume = true;
  for (const model::CachedRequestData& r : step.cached_requests)
    live_.at(r.req_id).must_resume = false;
  for (const model::RequestId& id : step.finished_req_ids)
    live_.erase(id);
  for (const model::NewRequestData& r : step.new_requests)
    live_.emplace(r.req_id, Live{.arrival_step = step.index});
  last_index_ = step.index;
}

} // namespace mc::scenarios
