// Engine-level coverage from the steps that ran (engine_coverage.h).
#include "harness/engine_coverage.h"

#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/stamps.h"

#include <algorithm>

namespace mc::harness {
namespace {

using F = model::CoverageFeatureId;

F prefix_hit_class(std::int32_t computed_tokens, std::int32_t block_size) {
  const std::int32_t blocks = computed_tokens / block_size;
  return blocks == 0   ? F::prefix_hit_none
         : blocks == 1 ? F::prefix_hit_1_block
                       : F::prefix_hit_several_blocks;
}

} // namespace

EngineCoverageCounter::EngineCoverageCounter(const model::Layout& layout, std::int32_t lookahead)
    : layout_(layout), lookahead_(lookahead) {}

// Whether a hit of `hit` tokens (a whole number of blocks) reaches past what every earlier
// prompt shares with this one: the states it starts from were registered while a request
// computed its own output (a chat's next turn hitting the answer of the last one), not while
// one prefilled. Then records this prompt's block-aligned prefixes.
bool EngineCoverageCounter::hit_past_prompts(const std::vector<std::int32_t>& prompt,
                                             std::int32_t hit) {
  const auto B = static_cast<std::size_t>(layout_.config.mamba_block_size);
  bool past = false;
  std::uint64_t h = 0;
  for (std::size_t end = B; end <= prompt.size(); end += B) {
    for (std::size_t t = end - B; t < end; ++t)
      h = model::mix64(h ^ static_cast<std::uint32_t>(prompt[t]));
    if (end == static_cast<std::size_t>(hit)) past = !prompt_prefixes_.contains(h);
    prompt_prefixes_.insert(h);
  }
  return past;
}

// Whether a new request is a chat's next turn (its prompt starts with an earlier request's
// whole prompt) whose hit starts from a prefix that another chat's request hit after that
// earlier turn came in. Then records this request.
bool EngineCoverageCounter::hit_a_b_a(const std::vector<std::int32_t>& prompt, std::int32_t hit) {
  const auto B = static_cast<std::size_t>(layout_.config.mamba_block_size);
  const std::int64_t order = admitted_++;
  std::optional<Admitted> earlier;
  std::uint64_t h = 0;
  std::uint64_t first_block = 0;
  for (std::size_t t = 0; t < prompt.size(); ++t) {
    if (const auto it = prompts_.find(h); t > 0 && it != prompts_.end()) earlier = it->second;
    h = model::mix64(h ^ static_cast<std::uint32_t>(prompt[t]));
    if (t + 1 == B) first_block = h;
  }
  const Admitted me{.order = order, .chat = earlier ? earlier->chat : order};
  prompts_.emplace(h, me);
  if (hit <= 0 || prompt.size() < B) return false;
  std::vector<Admitted>& hitters = hits_by_first_block_[first_block];
  const bool between = earlier && std::any_of(hitters.begin(), hitters.end(), [&](auto& b) {
                         return b.order > earlier->order && b.chat != earlier->chat;
                       });
  hitters.push_back(me);
  return between;
}

void EngineCoverageCounter::count(const model::Step& step, const oracle::engine::StepRecord& record,
                                  std::optional<std::int64_t> aborts) {
  count_requests(step, aborts);
  // Tokens computed before the step: every scheduled request is listed as new or cached.
  std::unordered_map<std::string_view, std::int32_t> computed;
  for (const model::NewRequestData& n : step.new_requests)
    computed[n.req_id] = n.num_computed_tokens;
  for (const model::CachedRequestData& c : step.cached_requests)
    computed[c.req_id] = c.num_computed_tokens;
  count_async(step, record);
  count_condensed(step);
  coverage_.add(F::retirement_across_null, record.retired_across_null);
  // A copy into no admitted request's table is its producer's (oracle/engine/block_manager.h).
  const auto admitted_holds = [&step](std::int32_t block) {
    const auto in = [block](const model::GroupBlockIds& t) {
      return !t.empty() && std::ranges::find(t[0], block) != t[0].end();
    };
    return std::ranges::any_of(step.new_requests, [&](const auto& n) { return in(n.block_ids); }) ||
           std::ranges::any_of(step.cached_requests,
                               [&](const auto& c) { return c.resumed && in(c.new_block_ids); });
  };
  for (const model::BlockCopy& c : step.block_copies)
    if (c.group == 0 && !admitted_holds(c.dst)) coverage_.add(F::partial_tail_copy);
  count_forward(step, record, computed);
  for (const model::ScheduledRequest& s : step.scheduled) {
    Request& r = requests_[s.req_id];
    const auto it = computed.find(s.req_id);
    count_row(s, it == computed.end() ? 0 : it->second, r);
    r.last_accepted = s.num_draft_tokens > 0 ? s.num_accepted_tokens : 1;
    r.last_step = step.index;
    running_.insert(s.req_id);
  }
  for (const model::NewRequestData& n : step.new_requests)
    if (std::ranges::any_of(n.block_ids, [&](const auto& ids) { return ids != n.block_ids[0]; }))
      coverage_.add(F::group_tables_differ);
  for (const model::LaunchRecord& l : record.launches) {
    model::count_launch(coverage_, {.layout = &layout_,
                                    .kind = l.kind,
                                    .num_reqs = static_cast<std::int32_t>(step.scheduled.size()),
                                    .after = &l.requests,
                                    .decisions = l.decisions});
    // The slots of a V2 step, once: preprocess_align is its first launch and maps every row.
    if (model::launch_kind_info(l.kind).family == model::LaunchFamily::preprocess_align)
      count_slots(step, l);
    // One row keeps its place in any gather: two or more rows differ in order.
    if (l.deferred && step.scheduled.size() >= 2) coverage_.add(F::deferred_postprocess_reordered);
  }
}

// The scheduler's order within a step: last step's finishes (and this step's aborts), the reset
// that force-preempts every running request, preemptions, then new and resumed requests.
void EngineCoverageCounter::count_requests(const model::Step& step,
                                           std::optional<std::int64_t> aborts) {
  for (const std::string& id : step.finished_req_ids) {
    const auto it = requests_.find(id);
    // A waiting request cannot finish by itself, unless a row of it was in flight when it was
    // preempted (async): otherwise it was aborted.
    if (!aborts && it != requests_.end() && it->second.waiting && !it->second.preempted_in_flight)
      coverage_.add(F::abort);
    if (it != requests_.end()) requests_.erase(it);
    running_.erase(id);
  }
  if (aborts) coverage_.add(F::abort, *aborts);
  // Back to waiting, by a reset (forced) or a preemption.
  const auto preempt = [&](const std::string& id, bool forced) {
    Request& r = requests_[id];
    r.waiting = true;
    r.forced = forced;
    r.preempted_in_flight = step.planned_during >= 0 && r.last_step == step.planned_during;
    if (r.preempted_in_flight) coverage_.add(F::preemption_in_flight);
  };
  if (step.reset_prefix_cache) {
    coverage_.add(F::reset);
    for (const std::string& id : running_)
      preempt(id, true);
    running_.clear();
  }
  for (const std::string& id : step.preempted_req_ids) {
    coverage_.add(F::preemption);
    preempt(id, false);
    running_.erase(id);
  }
  const std::int32_t block_size = layout_.config.mamba_block_size;
  for (const model::NewRequestData& n : step.new_requests) {
    requests_[n.req_id] =
        Request{.prompt_len = static_cast<std::int32_t>(n.prompt_token_ids.size())};
    coverage_.add(prefix_hit_class(n.num_computed_tokens, block_size));
    if (n.num_computed_tokens % block_size != 0) coverage_.add(F::partial_hit_with_copy);
    if (hit_past_prompts(n.prompt_token_ids, n.num_computed_tokens))
      coverage_.add(F::prefix_hit_past_prompts);
    if (hit_a_b_a(n.prompt_token_ids, n.num_computed_tokens)) coverage_.add(F::prefix_hit_a_b_a);
    const auto cacheable = static_cast<std::int32_t>(n.prompt_token_ids.size()) - 1;
    if (n.num_computed_tokens > 0 && n.num_computed_tokens == cacheable &&
        cacheable % block_size == 0)
      coverage_.add(F::prefix_hit_at_boundary);
  }
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (!c.resumed) continue;
    Request& r = requests_[c.req_id];
    coverage_.add(prefix_hit_class(c.num_computed_tokens, block_size));
    if (c.num_computed_tokens % block_size != 0) coverage_.add(F::partial_hit_with_copy);
    if (r.forced) coverage_.add(F::resume_after_reset);
    coverage_.add(r.last_accepted > 1 ? F::resume_after_accepted_drafts
                                      : F::resume_without_accepted_drafts);
    r.waiting = false;
    r.forced = false;
  }
}

// A prefill chunk by the block boundaries it reaches; a decode by whether its accepted tokens
// reach one (the post-step save copies then: REFERENCE.md 2) and how many drafts it accepted.
void EngineCoverageCounter::count_row(const model::ScheduledRequest& s,
                                      std::int32_t computed_before, const Request& r) {
  const std::int64_t B = layout_.config.mamba_block_size;
  const bool all_mode = layout_.config.mode == model::CacheMode::all;
  const std::int64_t c = computed_before;
  const bool decode =
      s.num_draft_tokens > 0 || (s.num_scheduled_tokens == 1 && computed_before >= r.prompt_len);
  // The drafter's lookahead reaches into the next page only when the row ends on a boundary:
  // that page must be allocated all the same (vLLM #57605).
  if (lookahead_ > 0 && (c + s.num_scheduled_tokens) % B == 0)
    coverage_.add(F::lookahead_at_page_boundary);
  if (!decode) {
    const std::int64_t crossed = (c + s.num_scheduled_tokens) / B - c / B;
    coverage_.add(crossed == 0   ? F::prefill_crosses_0
                  : crossed == 1 ? F::prefill_crosses_1
                                 : F::prefill_crosses_several);
    if (all_mode && c % B != 0) coverage_.add(F::all_mode_chunk_mid_block);
    return;
  }
  if (s.num_draft_tokens > 0 && c < r.prompt_len) coverage_.add(F::padded_prompt_tail);
  if (all_mode) coverage_.add(F::all_mode_decode);
  if (all_mode && s.num_draft_tokens > 0 && s.num_draft_tokens == layout_.config.num_spec_tokens)
    coverage_.add(F::all_mode_record);
  if (all_mode && s.num_draft_tokens > 0 && s.num_draft_tokens < layout_.config.num_spec_tokens &&
      s.num_accepted_tokens <= s.num_draft_tokens)
    coverage_.add(F::all_mode_partial_draft);
  const std::int32_t a = s.num_accepted_tokens;
  if ((c + a) / B == c / B) return;
  ++coverage_.decode_crossings_by_accepted[a];
  if (s.num_draft_tokens == 0)
    coverage_.add(F::decode_crosses_no_drafts);
  else if (a == 1)
    coverage_.add(F::decode_crosses_none_accepted);
  else if (a == 1 + s.num_draft_tokens)
    coverage_.add(F::decode_crosses_all_accepted);
  else
    coverage_.add(F::decode_crosses_some_accepted);
}

// Async scheduling: a step planned during the one before it, the rows it planned from counts
// that step's rejected drafts rolled back, and the frees it held back for that step (the
// oracle side's count: the scheduler's, or in a replay the shadow block manager's).
void EngineCoverageCounter::count_async(const model::Step& step,
                                        const oracle::engine::StepRecord& record) {
  if (step.planned_during < 0) return;
  coverage_.add(F::async_deferral);
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.num_computed_tokens_optimistic) coverage_.add(F::async_rollback);
  coverage_.add(F::async_held_free, record.frees_held_back);
}

// V1 align mode with spec decode: the rows whose input-batch row moved since the step before,
// which under async scheduling wrote their accepted counts by its own rows.
void EngineCoverageCounter::count_condensed(const model::Step& step) {
  const model::CacheConfig& config = layout_.config;
  if (config.runner != model::RunnerFlavour::v1 || config.mode != model::CacheMode::align) return;
  const model::InputBatchRows before = input_batch_;
  input_batch_.update(step.scheduled);
  if (step.planned_during < 0 || config.num_spec_tokens == 0) return;
  for (const model::ScheduledRequest& s : step.scheduled) {
    const std::int32_t row = before.row_of(s.req_id);
    if (row >= 0 && row != input_batch_.row_of(s.req_id)) coverage_.add(F::condensed_batch_async);
  }
}

// The forward's side, from the metadata the oracle derived (model/FORWARD.md): the window
// entry each align-mode read takes, the all-mode block indices a chunk writes by, and the
// decode-only steps that run as CUDA graphs, padded or not.
void EngineCoverageCounter::count_forward(
    const model::Step& step, const oracle::engine::StepRecord& record,
    const std::unordered_map<std::string_view, std::int32_t>& computed) {
  const model::ForwardMetadata& md = record.metadata;
  const bool all_mode = layout_.config.mode == model::CacheMode::all;
  for (const model::ForwardMetadataRow& m : md.rows) {
    if (m.batch_row < 0) continue;
    const model::ScheduledRequest& s = step.scheduled[static_cast<std::size_t>(m.batch_row)];
    const auto it = computed.find(s.req_id);
    const std::int32_t c = it == computed.end() ? 0 : it->second;
    if (c > 0 && m.decode && s.num_draft_tokens == 0 && m.num_accepted > 1)
      coverage_.add(F::zero_draft_spec_row);
    if (all_mode) {
      if (c > 0 && m.block_idx_first_scheduled > m.block_idx_last_computed)
        coverage_.add(F::all_mode_first_scheduled_next_block);
      if (m.block_idx_first_scheduled < m.block_idx_last_scheduled)
        coverage_.add(F::all_mode_intermediate_states);
      continue;
    }
    if (c == 0) continue;
    const std::int32_t entry = m.decode && m.num_accepted > 0 ? m.num_accepted - 1 : 0;
    coverage_.add(entry == 0   ? F::read_window_entry_0
                  : entry == 1 ? F::read_window_entry_1
                  : entry == 2 ? F::read_window_entry_2
                               : F::read_window_entry_3_plus);
  }
  const std::int32_t verify = 1 + layout_.config.num_spec_tokens;
  if (!all_mode && verify > 1 && md.num_prefills > 0 && !step.scheduled.empty() &&
      model::cuda_graph_batch_size(static_cast<std::int32_t>(step.scheduled.size())) &&
      std::ranges::all_of(step.scheduled, [&](const model::ScheduledRequest& s) {
        return s.num_scheduled_tokens == verify;
      }))
    coverage_.add(F::graph_shaped_prefill);
  if (md.num_prefills == 0 && md.num_decodes > 0 &&
      model::cuda_graph_batch_size(md.num_decodes).has_value()) {
    coverage_.add(F::graph_replay);
    if (md.num_padded > 0) coverage_.add(F::graph_padded_rows);
  }
}

void EngineCoverageCounter::count_slots(const model::Step& step,
                                        const model::LaunchRecord& launch) {
  const std::vector<std::int32_t>& map = launch.requests.idx_mapping;
  MC_ASSERT(map.size() == step.scheduled.size());
  for (std::size_t b = 0; b < map.size(); ++b) {
    const std::int32_t slot = map[b];
    if (slot < 0) continue;
    if (static_cast<std::size_t>(slot) >= slot_owner_.size())
      slot_owner_.resize(static_cast<std::size_t>(slot) + 1);
    std::string& owner = slot_owner_[static_cast<std::size_t>(slot)];
    const std::string& id = step.scheduled[b].req_id;
    if (!owner.empty() && owner != id) coverage_.add(F::v2_slot_reuse);
    owner = id;
  }
}

} // namespace mc::harness
