// Each scheduler mutant's rewrite of a step (scheduler_mutant.h).
#include "harness/scheduler_mutant.h"

#include "harness/managed_steps.h"

#include "model/block_table.h"
#include "model/errors.h"

#include <algorithm>
#include <vector>

namespace mc::harness {
namespace {

using oracle::engine::BlockPool;
using oracle::engine::Engine;

// A hit of `computed` tokens becomes the cached boundary before it (or none): the hit block's
// column turns null, the shorter hit's blocks take their column, and the row schedules the
// dropped tokens too, so the chunk ends where it did and the rest of the table stays as it is.
void shorten_hit(Engine& engine, model::Step& step, const std::string& req_id,
                 std::int32_t& computed, model::GroupBlockIds& table) {
  if (computed == 0) return;
  const oracle::engine::Scheduler& scheduler = engine.scheduler();
  const std::span<const BlockPool> pools = scheduler.blocks().pools();
  const std::int32_t B = engine.runner().layout().config.mamba_block_size;
  const oracle::engine::SchedRequest& r = scheduler.request(req_id);
  std::int32_t shorter = computed - B;
  std::vector<std::int32_t> hit_blocks(pools.size());
  for (; shorter > 0; shorter -= B) {
    bool everywhere = true;
    for (std::size_t g = 0; g < pools.size() && everywhere; ++g) {
      const auto block = pools[g].lookup(r.prefix_hashes[static_cast<std::size_t>(shorter)]);
      everywhere = block.has_value();
      if (everywhere) hit_blocks[g] = *block;
    }
    if (everywhere) break;
  }
  for (std::size_t g = 0; g < table.size(); ++g) {
    MC_ASSERT(static_cast<std::int32_t>(table[g].size()) >= computed / B);
    table[g][static_cast<std::size_t>(computed / B - 1)] = model::kNullBlockId;
    if (shorter > 0) table[g][static_cast<std::size_t>(shorter / B - 1)] = hit_blocks[g];
  }
  for (model::ScheduledRequest& s : step.scheduled) {
    if (s.req_id != req_id) continue;
    MC_ASSERT(s.num_draft_tokens == 0); // an admission schedules a prefill chunk
    s.token_ids.insert(s.token_ids.begin(), r.spec.tokens.begin() + shorter,
                       r.spec.tokens.begin() + computed);
    s.num_scheduled_tokens += computed - shorter;
  }
  computed = shorter;
}

void prefix_hit_one_block_short(Engine& engine, model::Step& step) {
  for (model::CachedRequestData& c : step.cached_requests)
    if (c.resumed) shorten_hit(engine, step, c.req_id, c.num_computed_tokens, c.new_block_ids);
  for (model::NewRequestData& n : step.new_requests)
    shorten_hit(engine, step, n.req_id, n.num_computed_tokens, n.block_ids);
}

// vLLM #50409: the hit's cap (num_tokens - 1) lands on a block boundary and the manager drops
// the block there, as if the boundary token were the one recomputed.
void hit_lost_at_exact_boundary(Engine& engine, model::Step& step) {
  const std::int32_t B = engine.runner().layout().config.mamba_block_size;
  const auto at_cap = [&](const std::string& id, std::int32_t computed) {
    const std::int32_t cacheable = engine.scheduler().request(id).num_tokens - 1;
    // A padded prompt tail (its one token with placeholder drafts) is left as it is.
    const bool padded = std::any_of(step.scheduled.begin(), step.scheduled.end(), [&](auto& s) {
      return s.req_id == id && s.num_draft_tokens != 0;
    });
    return computed > 0 && computed == cacheable && cacheable % B == 0 && !padded;
  };
  for (model::CachedRequestData& c : step.cached_requests)
    if (c.resumed && at_cap(c.req_id, c.num_computed_tokens))
      shorten_hit(engine, step, c.req_id, c.num_computed_tokens, c.new_block_ids);
  for (model::NewRequestData& n : step.new_requests)
    if (at_cap(n.req_id, n.num_computed_tokens))
      shorten_hit(engine, step, n.req_id, n.num_computed_tokens, n.block_ids);
}

// vLLM #57605: the null padding counts the lookahead, so where the chunk's end plus the
// lookahead reaches the next page the running block sits one column right of
// cdiv(end, B) - 1, the column the worker writes, which holds a null. Rows with drafts keep
// their speculative layout; a running block already in the row before the step stays.
void lookahead_displaces_running_column(Engine& engine, model::Step& step) {
  const model::CacheConfig& config = engine.runner().layout().config;
  const std::int32_t lookahead = kv_lookahead(config, engine.options());
  if (config.mode != model::CacheMode::align || lookahead == 0) return;
  const std::int32_t B = config.mamba_block_size;
  const auto displace = [&](const std::string& id, std::int64_t first_col,
                            model::GroupBlockIds& listed) {
    const oracle::engine::SchedRequest& r = engine.scheduler().request(id);
    if (r.planned.step != step.index) return;
    const std::int32_t end = r.planned.start + r.planned.tokens;
    const std::int64_t running = model::cdiv(end, B) - 1;
    if (model::cdiv(end + lookahead, B) - 1 == running || running < first_col) return;
    const std::int64_t at = running - first_col;
    if (std::any_of(listed.begin(), listed.end(),
                    [&](const auto& ids) { return at >= static_cast<std::int64_t>(ids.size()); }))
      return; // every group's table moves, or none
    for (std::vector<std::int32_t>& ids : listed)
      ids.insert(ids.begin() + at, model::kNullBlockId);
  };
  for (const model::ScheduledRequest& s : step.scheduled) {
    if (s.num_draft_tokens != 0) continue;
    for (model::NewRequestData& n : step.new_requests)
      if (n.req_id == s.req_id) displace(n.req_id, 0, n.block_ids);
    for (model::CachedRequestData& c : step.cached_requests) {
      if (c.req_id != s.req_id) continue;
      const model::GroupBlockIds* row = c.resumed ? nullptr : engine.runner().row(c.req_id);
      if (!c.resumed && (row == nullptr || row->empty())) continue;
      displace(c.req_id, c.resumed ? 0 : static_cast<std::int64_t>(row->front().size()),
               c.new_block_ids);
    }
  }
}

// A block of `pool` that nobody holds and that this step has not handed out yet, preferring
// one without a cache entry; nullopt when there is none.
std::optional<std::int32_t> fresh_block(const BlockPool& pool,
                                        const std::vector<std::int32_t>& handed_out) {
  std::optional<std::int32_t> cached_one;
  for (std::int32_t b = 1; b < pool.num_blocks(); ++b) {
    if (pool.ref_count(b) != 0) continue;
    if (std::find(handed_out.begin(), handed_out.end(), b) != handed_out.end()) continue;
    if (pool.cached(b) == nullptr) return b;
    if (!cached_one) cached_one = b;
  }
  return cached_one;
}

// Every old speculative block that the block manager moved to the end of a growing table is
// replaced there by a fresh block: the old one stays at its column (the runner's row keeps it).
void spec_blocks_left_behind(Engine& engine, model::Step& step) {
  const std::int32_t nsb = engine.runner().layout().config.num_spec_blocks;
  if (engine.runner().layout().config.mode != model::CacheMode::align || nsb == 0) return;
  const std::span<const BlockPool> pools = engine.scheduler().blocks().pools();
  std::vector<std::vector<std::int32_t>> handed_out(pools.size());
  for (model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) continue;
    const model::GroupBlockIds* row = engine.runner().row(c.req_id);
    if (row == nullptr) continue;
    for (std::size_t g = 0; g < row->size() && g < c.new_block_ids.size(); ++g) {
      const std::vector<std::int32_t>& old_row = (*row)[g];
      std::vector<std::int32_t>& tail = c.new_block_ids[g];
      const auto old_len = static_cast<std::int32_t>(old_row.size());
      const std::int32_t running = old_len + static_cast<std::int32_t>(tail.size()) - 1 - nsb;
      for (std::int32_t j = std::max(old_len - nsb, 0); j < std::min(old_len, running); ++j) {
        const auto moved =
            std::find(tail.begin(), tail.end(), old_row[static_cast<std::size_t>(j)]);
        if (moved == tail.end()) continue;
        const std::optional<std::int32_t> fresh = fresh_block(pools[g], handed_out[g]);
        if (!fresh) continue; // no block to take: this one scheduler would have preempted
        *moved = *fresh;
        handed_out[g].push_back(*fresh);
      }
    }
  }
}

// The ids of `step` that its planning took from each group's pool, in the order it took them:
// the batch rows' order (running requests, then admissions), each table's new blocks in table
// order. A running request's old speculative blocks moving to the end are not taken, nor is the
// block of a new or resumed request's prefix hit.
// `rows`, when given, gets for each take the index of its request's row in step.scheduled.
std::vector<std::vector<std::int32_t*>>
taken_ids(Engine& engine, model::Step& step,
          std::vector<std::vector<std::size_t>>* rows = nullptr) {
  const model::CacheConfig& config = engine.runner().layout().config;
  const auto num_groups = static_cast<std::size_t>(engine.runner().layout().num_groups());
  std::vector<std::vector<std::int32_t*>> taken(num_groups);
  if (rows != nullptr) rows->assign(num_groups, {});
  const auto take = [&](std::size_t g, std::size_t row, std::int32_t* id) {
    taken[g].push_back(id);
    if (rows != nullptr) (*rows)[g].push_back(row);
  };
  for (std::size_t r = 0; r < step.scheduled.size(); ++r) {
    const model::ScheduledRequest& s = step.scheduled[r];
    const auto cached = std::find_if(step.cached_requests.begin(), step.cached_requests.end(),
                                     [&](const auto& c) { return c.req_id == s.req_id; });
    const auto fresh = std::find_if(step.new_requests.begin(), step.new_requests.end(),
                                    [&](const auto& n) { return n.req_id == s.req_id; });
    if (cached != step.cached_requests.end() && !cached->resumed) {
      const model::GroupBlockIds* row = engine.runner().row(s.req_id);
      if (row == nullptr) continue;
      for (std::size_t g = 0; g < num_groups; ++g) {
        const std::vector<std::int32_t>& old_ids = (*row)[g];
        const std::size_t nsb = config.mode == model::CacheMode::align
                                    ? std::min<std::size_t>(config.num_spec_blocks, old_ids.size())
                                    : 0;
        for (std::int32_t& id : cached->new_block_ids[g])
          if (id != model::kNullBlockId &&
              std::find(old_ids.end() - static_cast<std::ptrdiff_t>(nsb), old_ids.end(), id) ==
                  old_ids.end())
            take(g, r, &id);
      }
      continue;
    }
    model::GroupBlockIds* table = nullptr;
    std::int32_t computed = 0;
    if (cached != step.cached_requests.end()) {
      table = &cached->new_block_ids;
      computed = cached->num_computed_tokens;
    } else if (fresh != step.new_requests.end()) {
      table = &fresh->block_ids;
      computed = fresh->num_computed_tokens;
    }
    if (table == nullptr) continue;
    const std::int64_t hit = computed / config.mamba_block_size - 1;
    for (std::size_t g = 0; g < num_groups; ++g)
      for (std::size_t j = 0; j < (*table)[g].size(); ++j)
        if ((*table)[g][j] != model::kNullBlockId && static_cast<std::int64_t>(j) != hit)
          take(g, r, &(*table)[g][j]);
  }
  return taken;
}

// The step a pool that pushes every free at the head of its queue would have given, held-back
// or not (of the held-back frees, those the step in flight can touch): at each take, the block
// freed last before it that no take has had yet, else the next block the real pool gave (those
// move down the line). The oracle's pool says which blocks it
// held back and how many blocks had been taken when each was freed.
void async_frees_visible_at_once(Engine& engine, model::Step& step) {
  if (step.planned_during < 0) return;
  const std::span<const BlockPool> pools = engine.scheduler().blocks().pools();
  std::vector<std::vector<std::int32_t*>> taken = taken_ids(engine, step);
  for (std::size_t g = 0; g < pools.size(); ++g) {
    // The frees the step in flight can still touch (a preempted, aborted or reset request's
    // running and speculative blocks): a block below the column a row in flight reads is only
    // held back by the model's policy, and handing it out at once is no bug.
    std::vector<std::int32_t> held;
    std::vector<std::int64_t> freed_after;
    for (std::size_t i = 0; i < pools[g].held_back_blocks().size(); ++i) {
      const std::int32_t b = pools[g].held_back_blocks()[i];
      if (!pools[g].held_back_touchable(b)) continue;
      held.push_back(b);
      freed_after.push_back(pools[g].held_back_after_takes()[i]);
    }
    if (held.empty()) continue;
    const std::int64_t first_take =
        pools[g].blocks_taken() - static_cast<std::int64_t>(taken[g].size());
    std::vector<std::int32_t> real;
    for (const std::int32_t* id : taken[g])
      real.push_back(*id);
    std::vector<bool> used(held.size(), false);
    std::size_t next_real = 0;
    for (std::size_t k = 0; k < taken[g].size(); ++k) {
      std::optional<std::size_t> last_freed;
      for (std::size_t i = 0; i < held.size(); ++i)
        if (!used[i] && freed_after[i] <= first_take + static_cast<std::int64_t>(k)) last_freed = i;
      if (last_freed) {
        used[*last_freed] = true;
        *taken[g][k] = held[*last_freed];
      } else {
        *taken[g][k] = real[next_real++];
      }
    }
  }
}

// A block a prefix hit took off the free queue in the pool's eyes only: its stale entry, in a
// group's pool.
struct StaleEntry {
  std::size_t group = 0;
  std::int32_t block = 0;
};

// vLLM #50630: each hit that revives a cached block nobody held (the hitter its only holder
// after the planning) leaves a stale free-queue entry, which the next take of that group's pool
// pops: in this step, a take of the reviving request's own allocation or of a row after it;
// else in a later one. The block goes out again if someone still holds it (one freed since
// went back to the queue properly, and the stale entry with it).
void hit_leaves_free_entry(Engine& engine, model::Step& step, std::vector<StaleEntry>& stale) {
  const std::span<const BlockPool> pools = engine.scheduler().blocks().pools();
  const std::int32_t B = engine.runner().layout().config.mamba_block_size;
  std::vector<std::vector<std::size_t>> rows;
  std::vector<std::vector<std::int32_t*>> taken = taken_ids(engine, step, &rows);
  std::vector<std::size_t> next_take(pools.size(), 0); // takes before it are spent
  std::vector<StaleEntry> left;
  // The first take of group g from row `from` on that no stale entry has had; false: none.
  const auto pop = [&](const StaleEntry& e, std::size_t from) {
    std::size_t k = next_take[e.group];
    while (k < taken[e.group].size() && rows[e.group][k] < from)
      ++k;
    if (k == taken[e.group].size()) return false;
    *taken[e.group][k] = e.block;
    next_take[e.group] = k + 1;
    return true;
  };
  for (const StaleEntry& e : stale)
    if (pools[e.group].ref_count(e.block) != 0 && !pop(e, 0)) left.push_back(e);
  stale = std::move(left);
  const auto revived = [&](const std::string& id, const model::GroupBlockIds& table,
                           std::int32_t computed) {
    if (computed < B) return;
    const auto row = static_cast<std::size_t>(
        std::find_if(step.scheduled.begin(), step.scheduled.end(),
                     [&](const model::ScheduledRequest& s) { return s.req_id == id; }) -
        step.scheduled.begin());
    const auto col = static_cast<std::size_t>(computed / B - 1);
    for (std::size_t g = 0; g < table.size() && g < pools.size(); ++g) {
      if (col >= table[g].size()) continue;
      const std::int32_t block = table[g][col];
      if (block == model::kNullBlockId || pools[g].ref_count(block) != 1) continue;
      const StaleEntry e{.group = g, .block = block};
      if (!pop(e, row)) stale.push_back(e);
    }
  };
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed) revived(c.req_id, c.new_block_ids, c.num_computed_tokens);
  for (const model::NewRequestData& n : step.new_requests)
    revived(n.req_id, n.block_ids, n.num_computed_tokens);
}

} // namespace

std::string_view to_string(SchedulerMutant mutant) {
  if (mutant == SchedulerMutant::none) return "none";
  const auto i = static_cast<std::size_t>(mutant) - 1;
  MC_ASSERT(i < gpu::scheduler_mutants().size());
  return gpu::scheduler_mutants()[i].name;
}

std::optional<SchedulerMutant> find_scheduler_mutant(std::string_view name) {
  return gpu::find_in_catalogue<SchedulerMutant>(gpu::scheduler_mutants(), name);
}

std::function<void(model::Step&)> scheduler_mutant_edit(SchedulerMutant mutant, Engine& engine) {
  switch (mutant) {
  case SchedulerMutant::none:
    return {};
  case SchedulerMutant::prefix_hit_one_block_short:
    return [&engine](model::Step& step) { prefix_hit_one_block_short(engine, step); };
  case SchedulerMutant::spec_blocks_left_behind:
    return [&engine](model::Step& step) { spec_blocks_left_behind(engine, step); };
  case SchedulerMutant::async_frees_visible_at_once:
    return [&engine](model::Step& step) { async_frees_visible_at_once(engine, step); };
  case SchedulerMutant::hit_lost_at_exact_boundary:
    return [&engine](model::Step& step) { hit_lost_at_exact_boundary(engine, step); };
  case SchedulerMutant::lookahead_displaces_running_column:
    return [&engine](model::Step& step) { lookahead_displaces_running_column(engine, step); };
  case SchedulerMutant::hit_leaves_free_entry:
    return [&engine, stale = std::vector<StaleEntry>{}](model::Step& step) mutable {
      hit_leaves_free_entry(engine, step, stale);
    };
  }
  MC_ASSERT(false);
  return {};
}

} // namespace mc::harness
