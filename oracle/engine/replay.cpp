#include "oracle/engine/replay.h"

#include "model/conv_history.h"
#include "model/errors.h"
#include "oracle/engine/step_probe.h"
#include "oracle/engine/table_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <unordered_set>

namespace mc::oracle::engine {

Replayer::Replayer(const model::Layout& layout, const RunnerOptions& options,
                   std::int32_t cache_sweep_every, Structures structures, bool async_scheduling,
                   model::SchedulerContract contract)
    : layout_(layout), cache_sweep_every_(cache_sweep_every),
      tail_tokens_(model::conv_history_rows_max(layout)), async_(async_scheduling),
      contract_(contract),
      hold_in_flight_(contract.unordered_writer || model::postprocess_writes_out_of_order(
                                                       options, layout.config.num_spec_tokens)),
      blocks_(layout.config, layout.num_groups(), static_cast<std::int32_t>(layout.spec.num_blocks),
              structures, contract.hash_block_size),
      attention_(contract.attention_groups > 0
                     ? AttentionShadow(contract.attention_groups, layout.config.attn_block_size)
                 : contract.eagle ? AttentionShadow::prefixes_only(layout.config.attn_block_size)
                                  : AttentionShadow(0, layout.config.attn_block_size)),
      runner_(layout, options, structures), ledger_(structures), checker_(structures) {
  MC_ASSERT(cache_sweep_every >= 1);
  blocks_.reach_untouched_held_back(); // judged by what the step in flight touches (mark_in_flight)
  attention_.set_hash_unit(contract.hash_block_size);
  MC_ASSERT(layout.config.mode != model::CacheMode::none);
  // vLLM registers a boundary again in another block while one holds it (BlockPool keeps
  // every holder; a hit finds the first).
  if (contract.registration == model::CacheRegistration::at_schedule)
    blocks_.allow_duplicate_boundaries();
}

Finding Replayer::inconsistent(std::int64_t step, std::string req_id, std::string detail,
                               std::string expected) const {
  return make_finding(layout_, FindingKind::inconsistent_step, step, std::move(req_id), -1, -1, -1,
                      std::move(detail), std::move(expected));
}

// A running request continues from what the steps before it committed; a new or resumed one
// starts from a prefix hit, which ends on a block boundary.
std::optional<Finding> Replayer::check_counts(const model::Step& step) const {
  const std::int32_t unit = blocks_.hash_unit();
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) {
      if (c.num_computed_tokens % unit != 0)
        return inconsistent(step.index, c.req_id,
                            fmt::format("resumed with {} computed tokens, not a hash boundary",
                                        c.num_computed_tokens),
                            fmt::format("a prefix hit of a multiple of {} tokens (or 0)", unit));
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
    if (auto f = check_planned_count(step, c)) return f;
  }
  return std::nullopt;
}

// The count a running request was planned from: what it committed, plus, when the step in
// flight ran a row of it, that whole row (its drafts taken as accepted, REFERENCE.md 3).
std::optional<Finding> Replayer::check_planned_count(const model::Step& step,
                                                     const model::CachedRequestData& c) const {
  std::int32_t expected = c.num_computed_tokens;
  std::string why = "no step was in flight when it was planned";
  if (step.planned_during >= 0) {
    if (step.planned_during != last_step_)
      return inconsistent(step.index, c.req_id,
                          fmt::format("the step was planned during step {}", step.planned_during),
                          fmt::format("step {}, the step before it", last_step_));
    const auto it = last_rows_.find(c.req_id);
    if (it == last_rows_.end()) {
      why = fmt::format("it had no row in step {}, in flight", step.planned_during);
    } else {
      expected = it->second.start + it->second.scheduled;
      why = fmt::format("step {}, in flight, scheduled {} tokens from {}, all taken as computed",
                        step.planned_during, it->second.scheduled, it->second.start);
    }
  }
  const std::int32_t planned = c.num_computed_planned();
  if (planned == expected) return std::nullopt;
  return inconsistent(step.index, c.req_id,
                      fmt::format("was planned from {} computed tokens", planned),
                      fmt::format("{} ({})", expected, why));
}

// What the step in flight can still touch: a row reads its state at the column of its last
// computed token and writes from there on (the running, boundary and speculative columns, its
// deferred postprocess too), never below. A block below, retired or freed while that step runs,
// is nobody's to write, so it may be hit or handed out at once: vLLM's manager does both, even
// when the writer is not ordered with the steps (a V2 run with a deferred postprocess under
// async, all mode's retirements below the next read). Whole tables are held back as the model's
// scheduler holds them (the same frees counted), but only the touchable blocks are out of
// reach; the others stay reachable (BlockPool::reach_untouched_held_back). Whole tables out of
// reach made such hits a false wrong_prefix_hit.
void Replayer::mark_in_flight(const model::Step& step) {
  blocks_.release_in_flight();
  if (step.planned_during < 0 || !hold_in_flight_) return;
  for (const auto& [id, row] : last_rows_)
    if (const RequestBlocks* held = blocks_.find(id)) blocks_.mark_in_flight(*held, row.start);
}

std::optional<Finding> Replayer::commit_pending(const model::Step& step) {
  if (pending_step_ < 0) return std::nullopt;
  const std::int64_t committed_step = pending_step_;
  pending_step_ = -1;
  for (const auto& [id, num_committed, drafted] : pending_) {
    // Resumed in this step: its table is a new one, and the row in flight committed nothing.
    const bool resumed =
        std::any_of(step.cached_requests.begin(), step.cached_requests.end(),
                    [&](const model::CachedRequestData& c) { return c.resumed && c.req_id == id; });
    const RequestTruth* t = ledger_.find(id);
    if (resumed || t == nullptr) continue;
    // A partial tail only where this step runs no row of the request, which would overwrite it
    // (as the model's scheduler registers it).
    const bool runs_on =
        std::any_of(step.scheduled.begin(), step.scheduled.end(),
                    [&](const model::ScheduledRequest& s) { return s.req_id == id; });
    blocks_.cache_blocks(id, num_committed, t->hashes, t->tokens, tail_tokens_,
                         runs_on || drafted ? 0 : t->num_prompt_tokens);
    attention_.register_blocks(id, t->hashes, num_committed, t->num_prompt_tokens);
  }
  pending_.clear();
  const bool sweep = stats_.steps % cache_sweep_every_ == 0;
  return checker_.after_commit(committed_step, blocks_, runner_, sweep, stats_.bytes_checked);
}

// The shadow block manager follows the step: departures free, running requests drop their
// stale block and grow, new and resumed requests take their first tables.
std::optional<Finding> Replayer::apply_tables(const model::Step& step) {
  plan_registrations(step);
  note_hit_copies(step);
  const auto depart = [this](const model::RequestId& id, std::int64_t& counted) {
    blocks_.free_request(id);
    attention_.drop(id);
    computed_after_.erase(id);
    ++counted;
  };
  for (const model::RequestId& id : step.finished_req_ids)
    depart(id, stats_.finished);
  // A request preempted by this very planning may have copied its partial tail first.
  for (const model::RequestId& id : step.preempted_req_ids)
    if (auto f = adopt_producer_copies(step, id)) return f;
  for (const model::RequestId& id : step.preempted_req_ids)
    depart(id, stats_.preemptions);
  if (step.reset_prefix_cache) {
    for (const auto& [id, computed] : computed_after_)
      blocks_.free_request(id);
    computed_after_.clear();
    blocks_.reset_cache();
    attention_.reset();
    ++stats_.resets;
  }
  // The scheduler freed stale blocks from the tokens committed when it planned (those before
  // the step in flight, if that step ran a row of the request), and grew tables from the count
  // it planned from.
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) continue;
    const auto in_flight = step.planned_during >= 0 ? last_rows_.find(c.req_id) : last_rows_.end();
    const std::int32_t processed =
        in_flight != last_rows_.end() ? in_flight->second.start : c.num_computed_tokens;
    if (!c.held_block_ids.empty())
      if (auto f = check_retention(layout_, step.index, c.req_id, c.held_block_ids, processed))
        return f;
    blocks_.remove_skipped(c.req_id, processed);
    if (!c.held_block_ids.empty()) blocks_.adopt_frees(c.req_id, c.held_block_ids);
  }
  const HeldBack held_back = [this](std::int32_t group, std::int32_t block) {
    return blocks_.pool(group).held_back_touchable(block);
  };
  model::GroupBlockIds old_row;
  std::vector<std::int32_t> taken; // by the attention groups
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) continue;
    if (const RequestBlocks* held = step.planned_during >= 0 ? blocks_.find(c.req_id) : nullptr) {
      old_row.resize(held->groups.size());
      for (std::size_t g = 0; g < held->groups.size(); ++g)
        old_row[g] = held->groups[g].block_ids;
      if (auto f =
              check_growth_handout(layout_, step, c.req_id, old_row, c.new_block_ids, held_back))
        return f;
    }
    if (auto f = adopt_producer_copies(step, c.req_id)) return f;
    if (auto why = blocks_.adopt_growth(c.req_id, c.new_block_ids))
      return inconsistent(step.index, c.req_id, *why, "a free block");
    if (auto f = taken_by_mamba(step.index, c.req_id, c.new_block_ids)) return f;
    taken.clear();
    attention_.grow(c.req_id, c.attention_block_ids, taken);
    if (auto f = taken_elsewhere(step.index, c.req_id, -1, taken)) return f;
  }
  // Each hit is held to the longest the shadow cache offers as the request is admitted, in
  // the scheduler's order: resumed requests (at the head of its queue) before new ones.
  // A request the ledger does not know (resumed without ever running) has no hashes: its
  // scheduled row is reported by the ledger.
  const auto first = [&](const std::string& id, const model::GroupBlockIds& table,
                         const model::GroupBlockIds& attention_table, std::int32_t computed,
                         std::span<const model::TokenHash> hashes, std::int32_t num_tokens,
                         std::int32_t num_prompt) -> std::optional<Finding> {
    if (!hashes.empty()) {
      // Longer than the longest reachable is a wrong hit; so is shorter than the longest a
      // manager must offer. Between the two lie blocks held back by policy only, which a
      // manager may hit at once (vLLM does) or keep back.
      const std::int32_t longest = expected_hit(hashes, num_tokens, false);
      const std::int32_t shortest = expected_hit(hashes, num_tokens, true);
      const std::int32_t held_to = computed > longest ? longest : std::max(computed, shortest);
      if (auto f = check_prefix_hit(layout_, step.index, id, computed, held_to)) return f;
    }
    if (auto f = check_first_handout(layout_, step, id, table, computed, held_back)) return f;
    if (auto f = adopt_hit_copies(step, id, computed, hashes)) return f;
    stats_.prefix_hits += computed > 0 ? 1 : 0;
    if (auto why = blocks_.adopt_first(id, table, computed))
      return inconsistent(step.index, id, *why, "a table the block manager could give");
    if (auto f = taken_by_mamba(step.index, id, table)) return f;
    taken.clear();
    attention_.start(id, attention_table, computed, taken);
    if (auto f = taken_elsewhere(step.index, id, -1, taken)) return f;
    // Its allocation registers its attention blocks before the next admission looks.
    if (const auto planned = registrations_.find(id); planned != registrations_.end())
      attention_.register_blocks(id, hashes, planned->second, num_prompt);
    return std::nullopt;
  };
  // The attention hit bounds a hit: the running requests' allocations, made before any
  // admission, registered their attention blocks first.
  note_running_attention(step);
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (!c.resumed) continue;
    ++stats_.resumes;
    const RequestTruth* truth = ledger_.find(c.req_id);
    if (auto f =
            first(c.req_id, c.new_block_ids, c.attention_block_ids, c.num_computed_tokens,
                  truth != nullptr ? std::span(truth->hashes) : std::span<const model::TokenHash>(),
                  truth != nullptr ? truth->num_tokens() : 0,
                  truth != nullptr ? truth->num_prompt_tokens : 0))
      return f;
  }
  std::vector<model::TokenHash> hashes;
  for (const model::NewRequestData& n : step.new_requests) {
    ++stats_.arrivals;
    hashes.assign(1, model::kEmptySequenceHash);
    for (const std::int32_t token : n.prompt_token_ids)
      hashes.push_back(model::extend_hash(hashes.back(), token));
    const auto num_prompt = static_cast<std::int32_t>(n.prompt_token_ids.size());
    if (auto f = first(n.req_id, n.block_ids, n.attention_block_ids, n.num_computed_tokens, hashes,
                       num_prompt, num_prompt))
      return f;
  }
  for (std::size_t i = 0; i < step.block_copies.size(); ++i)
    if (!copy_adopted_[i]) {
      const model::BlockCopy& c = step.block_copies[i];
      return inconsistent(step.index, "",
                          fmt::format("block copy [{}, {}, {}] serves no allocation of the step: "
                                      "its source is no admitted request's hit, nor a partial "
                                      "tail of a request that runs on",
                                      c.group, c.src, c.dst),
                          "copies of partial-hash hits and of partial tails only");
    }
  return std::nullopt;
}

void Replayer::note_hit_copies(const model::Step& step) {
  copy_adopted_.assign(step.block_copies.size(), false);
  copy_hit_of_.assign(step.block_copies.size(), std::string());
  if (step.block_copies.empty()) return;
  const std::int32_t B = layout_.config.mamba_block_size;
  const auto note = [&](const std::string& id, const model::GroupBlockIds& table,
                        std::int32_t computed) {
    if (computed % B == 0) return; // a hit on a block boundary shares its block
    const auto col = static_cast<std::size_t>(model::cdiv(computed, B) - 1);
    for (std::size_t i = 0; i < step.block_copies.size(); ++i) {
      const model::BlockCopy& c = step.block_copies[i];
      const auto& row = table[static_cast<std::size_t>(c.group)];
      if (col < row.size() && row[col] == c.dst) copy_hit_of_[i] = id;
    }
  };
  for (const model::NewRequestData& n : step.new_requests)
    note(n.req_id, n.block_ids, n.num_computed_tokens);
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed) note(c.req_id, c.new_block_ids, c.num_computed_tokens);
}

std::optional<Finding> Replayer::adopt_producer_copies(const model::Step& step,
                                                       const std::string& req_id) {
  const RequestBlocks* held = blocks_.find(req_id);
  if (held == nullptr) return std::nullopt;
  for (std::size_t i = 0; i < step.block_copies.size(); ++i) {
    const model::BlockCopy& c = step.block_copies[i];
    if (copy_adopted_[i] || !copy_hit_of_[i].empty()) continue;
    const auto& row = held->groups[static_cast<std::size_t>(c.group)].block_ids;
    if (std::find(row.begin(), row.end(), c.src) == row.end()) continue;
    copy_adopted_[i] = true;
    if (auto why = blocks_.adopt_copy(c, false, step.index))
      return inconsistent(step.index, req_id, *why, "a copy into a free block");
    // Its destination is in no table, but taken from the shared pool all the same.
    if (auto f = taken_elsewhere(step.index, req_id, c.group, std::span(&c.dst, 1))) return f;
  }
  return std::nullopt;
}

std::optional<Finding> Replayer::adopt_hit_copies(const model::Step& step,
                                                  const std::string& req_id, std::int32_t computed,
                                                  std::span<const model::TokenHash> hashes) {
  for (std::size_t i = 0; i < step.block_copies.size(); ++i) {
    if (copy_adopted_[i] || copy_hit_of_[i] != req_id) continue;
    const model::BlockCopy& c = step.block_copies[i];
    // The copy reads the block that caches the state after the hit's tokens.
    const auto holder =
        static_cast<std::size_t>(computed) < hashes.size()
            ? blocks_.pool(c.group).lookup(hashes[static_cast<std::size_t>(computed)])
            : std::nullopt;
    if (holder != c.src)
      return inconsistent(step.index, req_id,
                          fmt::format("copies block {} of group {} for its hit of {} tokens, "
                                      "which {}",
                                      c.src, c.group, computed,
                                      holder ? fmt::format("block {} caches", *holder)
                                             : std::string("no block caches")),
                          "a copy of the block the hit found");
    copy_adopted_[i] = true;
    if (auto why = blocks_.adopt_copy(c, true, step.index))
      return inconsistent(step.index, req_id, *why, "a copy into a free block");
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

std::int32_t Replayer::expected_hit(std::span<const model::TokenHash> hashes,
                                    std::int32_t num_tokens, bool strict) const {
  const std::int32_t B = layout_.config.mamba_block_size;
  if (!attention_.active())
    return longest_prefix_hit(blocks_.pools(), B, hashes, num_tokens, blocks_.hash_unit(), strict);
  // vLLM's hybrid hit: the rightmost cached Mamba boundary at or below the attention groups'
  // hit (their contiguous cached prefix, at most num_tokens - 1 tokens), less a block with
  // EAGLE.
  const auto cap = static_cast<std::int32_t>(
      std::min<std::int64_t>(num_tokens - 1, static_cast<std::int64_t>(hashes.size()) - 1));
  std::int32_t attention = attention_.longest_hit(hashes, cap);
  if (contract_.eagle) attention = std::max(attention - attention_.block_size(), 0);
  // Every group's hit is a whole number of the scheduler's blocks, lcm of the groups' block
  // sizes, or of the hash unit with partial-hash hits (MambaManager skips boundaries not
  // aligned to it: single_type_kv_cache_manager.py find_longest_cache_hit, alignment_tokens,
  // at 6a391a931a92).
  const std::int32_t unit =
      blocks_.hash_unit() < B ? blocks_.hash_unit() : std::lcm(B, attention_.block_size());
  return longest_prefix_hit(blocks_.pools(), B, hashes, attention + 1, unit, strict);
}

void Replayer::note_running_attention(const model::Step& step) {
  if (!attention_.active() || contract_.registration != model::CacheRegistration::at_schedule)
    return;
  for (const model::CachedRequestData& c : step.cached_requests) {
    const RequestTruth* t = c.resumed ? nullptr : ledger_.find(c.req_id);
    const auto planned = registrations_.find(c.req_id);
    if (t != nullptr && planned != registrations_.end())
      attention_.register_blocks(c.req_id, t->hashes, planned->second, t->num_prompt_tokens);
  }
}

std::optional<Finding> Replayer::taken_elsewhere(std::int64_t step, const std::string& req_id,
                                                 std::int32_t group,
                                                 std::span<const std::int32_t> ids) {
  if (!contract_.shared_pool) return std::nullopt;
  for (const std::int32_t id : ids) {
    if (id <= model::kNullBlockId) continue;
    if (group >= 0) attention_.evict(id);
    for (std::int32_t h = 0; h < blocks_.num_groups(); ++h) {
      if (h == group || id >= blocks_.pool(h).num_blocks()) continue;
      if (!blocks_.mutable_pool(h).taken_elsewhere(id))
        return inconsistent(step, req_id,
                            fmt::format("takes block {} for {} while mamba group {} holds it", id,
                                        group < 0 ? std::string("an attention group")
                                                  : fmt::format("mamba group {}", group),
                                        h),
                            "a block no other group of the shared pool holds");
    }
  }
  return std::nullopt;
}

std::optional<Finding> Replayer::taken_by_mamba(std::int64_t step, const std::string& req_id,
                                                const model::GroupBlockIds& tables) {
  for (std::size_t g = 0; g < tables.size(); ++g)
    if (auto f = taken_elsewhere(step, req_id, static_cast<std::int32_t>(g), tables[g])) return f;
  return std::nullopt;
}

void Replayer::plan_registrations(const model::Step& step) {
  registrations_.clear();
  tail_rows_.clear();
  if (!plans_registrations()) return;
  std::unordered_map<std::string_view, std::pair<std::int32_t, std::int32_t>> start_known;
  std::unordered_set<std::string_view> samples_nothing;
  for (const model::NewRequestData& n : step.new_requests)
    start_known.emplace(n.req_id, std::pair(n.num_computed_tokens,
                                            static_cast<std::int32_t>(n.prompt_token_ids.size())));
  for (const model::CachedRequestData& c : step.cached_requests) {
    const RequestTruth* t = ledger_.find(c.req_id);
    if (t == nullptr) continue; // resumed without ever running: its row is the ledger's finding
    // What its scheduler knew planning the step: its num_tokens (the last sampled token
    // counted, known or not), before the output of the step in flight then if it had a row
    // there.
    const auto before = async_ ? known_before_output_.find(c.req_id) : known_before_output_.end();
    start_known.emplace(
        c.req_id,
        std::pair(c.resumed ? c.num_computed_tokens : c.num_computed_planned(),
                  before != known_before_output_.end() ? before->second : t->num_tokens()));
    // A row in flight that ends short of the tokens known samples nothing: no token of this
    // step is a placeholder, so every token it schedules but its drafts was known to its
    // scheduler. The ledger may know fewer: a resumed request's last sample, the stale output
    // of the row in flight when it was preempted, is listed first by the row that computes it
    // (vLLM caches min(num_computed + num_new, num_tokens) with that sample counted).
    const auto row = last_rows_.find(c.req_id);
    if (before != known_before_output_.end() && row != last_rows_.end() &&
        row->second.start + row->second.scheduled < before->second)
      samples_nothing.insert(c.req_id);
  }
  for (const model::ScheduledRequest& s : step.scheduled) {
    const auto it = start_known.find(s.req_id);
    if (it == start_known.end()) continue;
    auto [start, known] = it->second;
    if (samples_nothing.contains(s.req_id))
      known = std::max(known, start + s.num_scheduled_tokens - s.num_draft_tokens);
    const std::int32_t registered = std::min(start + s.num_scheduled_tokens, known);
    registrations_.emplace(s.req_id, registered);
    // A partial tail only from the row that computes its last token and keeps its state in the
    // tail's column: a padded tail whose drafts cross into the next block runs its state there.
    const std::int32_t B = layout_.config.mamba_block_size;
    if (start < registered && (start + s.num_scheduled_tokens - 1) / B == registered / B)
      tail_rows_.insert(s.req_id);
  }
}

void Replayer::register_at_schedule(const model::Step& step) {
  if (contract_.registration != model::CacheRegistration::at_schedule) return;
  for (const model::ScheduledRequest& s : step.scheduled) {
    const auto planned = registrations_.find(s.req_id);
    if (planned == registrations_.end()) continue;
    const RequestTruth& t = ledger_.truth(s.req_id);
    // The partial tail from the planning of the row that computes its last token (vLLM's
    // MambaManager._cache_partial_tail_block at 6a391a931a92), a padded prompt tail's too while
    // its drafts stay in the tail's block. Not from a row planned past it while the row that
    // wrote it was in flight, which goes on writing that block.
    blocks_.cache_blocks(s.req_id, planned->second, t.hashes, t.tokens, tail_tokens_,
                         tail_rows_.contains(s.req_id) ? t.num_prompt_tokens : 0);
    attention_.register_blocks(s.req_id, t.hashes, planned->second, t.num_prompt_tokens);
  }
}

void Replayer::commit(const model::Step& step) {
  // Registered as the step was planned, it is first hit in the next planning: made once the
  // step ran, so that its own writes into them are the ones registration promised.
  register_at_schedule(step);
  blocks_.release_copies(step.index); // the step ran its copies
  last_rows_.clear();
  for (const model::ScheduledRequest& s : step.scheduled) {
    const RequestTruth& t = ledger_.truth(s.req_id);
    computed_after_[s.req_id] = t.num_committed;
    if (async_) {
      pending_.push_back({.req_id = s.req_id,
                          .num_committed = t.num_committed,
                          .drafted = s.num_draft_tokens > 0});
    } else if (contract_.registration == model::CacheRegistration::after_commit) {
      blocks_.cache_blocks(s.req_id, t.num_committed, t.hashes, t.tokens, tail_tokens_,
                           s.num_draft_tokens > 0 ? 0 : t.num_prompt_tokens);
      attention_.register_blocks(s.req_id, t.hashes, t.num_committed, t.num_prompt_tokens);
    }
    last_rows_[s.req_id] = {.start = t.listed_computed, .scheduled = s.num_scheduled_tokens};
    ++stats_.request_steps;
    stats_.tokens += s.num_scheduled_tokens;
  }
  ++stats_.steps;
  last_step_ = step.index;
  if (async_) {
    pending_step_ = step.index;
    if (hold_in_flight_) in_flight_accesses_.remember(step, last_record_);
  }
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
  const std::int64_t held_before = blocks_.frees_held_back();
  const std::int64_t retired_before = blocks_.retired_across_null();
  if (async_) {
    mark_in_flight(step);
    // Planned after every earlier step completed: the last one committed before it.
    if (step.planned_during < 0)
      if (auto f = commit_pending(step)) return f;
  }
  if (auto f = apply_tables(step)) return f;
  const std::int64_t frees_held_back = blocks_.frees_held_back() - held_before;
  const std::int64_t retired_across_null = blocks_.retired_across_null() - retired_before;
  if (async_)
    if (auto f = commit_pending(step)) return f;
  if (auto mismatch = ledger_.begin_step(step))
    return make_finding(layout_, FindingKind::token_mismatch, step.index, "", -1, -1, -1, *mismatch,
                        "tokens that agree with the committed sequence");
  if (auto f = check_known_drafts(layout_, step, ledger_)) return f;
  last_record_ = runner_.execute(step, ledger_);
  last_record_.frees_held_back = frees_held_back;
  last_record_.retired_across_null = retired_across_null;
  stats_.bytes_checked += last_record_.bytes_checked;
  for (const LaunchRecord& l : last_record_.launches) {
    ++stats_.launches;
    stats_.copies_by_kind[std::string(model::to_string(l.kind))] +=
        static_cast<std::int64_t>(l.decisions.size());
  }
  if (last_record_.finding) return last_record_.finding;
  if (hold_in_flight_)
    if (auto f = in_flight_accesses_.check(layout_, step, last_record_)) return f;
  known_before_output_.clear();
  if (async_ && plans_registrations())
    for (const model::ScheduledRequest& s : step.scheduled)
      known_before_output_[s.req_id] =
          static_cast<std::int32_t>(ledger_.truth(s.req_id).tokens.size());
  ledger_.end_step(step);
  if (auto f =
          checker_.after_step(step, last_record_, blocks_, runner_, ledger_, stats_.bytes_checked))
    return f;
  commit(step);
  if (async_) return std::nullopt; // its registrations wait for the next step's tables
  const bool sweep = stats_.steps % cache_sweep_every_ == 0;
  return checker_.after_commit(step.index, blocks_, runner_, sweep, stats_.bytes_checked);
}

} // namespace mc::oracle::engine
