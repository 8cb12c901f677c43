#include "oracle/engine/driver.h"

#include "model/errors.h"
#include "oracle/engine/step_probe.h"
#include "oracle/engine/table_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

namespace mc::oracle::engine {

Engine::Engine(const model::Layout& layout, std::vector<RequestSpec> requests, std::uint64_t seed,
               const EngineOptions& options)
    : options_(options), scheduler_(layout, options.scheduler, std::move(requests),
                                    model::mix64(seed + 1), options.structures),
      runner_(layout, options.runner, options.structures), ledger_(options.structures),
      checker_(options.structures) {
  validate_options(options, layout);
}

bool Engine::step(const std::function<void(model::Step&)>& edit) {
  if (report_.first_finding || scheduler_.done()) return false;
  const std::int64_t index = scheduler_.stats().steps;
  const bool async = options_.scheduler.async_scheduling;
  model::Step step;
  StepRecord record;
  std::optional<Finding> finding;
  bool scheduled = false;
  try {
    const model::AssertionsReported reported; // a broken assumption of the model: a finding
    const std::int64_t held_before = scheduler_.blocks().frees_held_back();
    const std::int64_t retired_before = scheduler_.blocks().retired_across_null();
    // Async: the step in flight is still needed (its commit comes after this planning).
    step = scheduler_.schedule(async ? model::Step{} : std::move(last_step_));
    scheduled = true;
    const std::int64_t frees_held_back = scheduler_.blocks().frees_held_back() - held_before;
    const std::int64_t retired_across_null =
        scheduler_.blocks().retired_across_null() - retired_before;
    edited_ = static_cast<bool>(edit);
    if (edit) edit(step);
    probe_step(step.index);
    finding = async ? run_planned_in_flight(step, record) : run_scheduled(step, record);
    record.frees_held_back = frees_held_back;
    record.retired_across_null = retired_across_null;
  } catch (const model::AssertionFailure& e) {
    if (!scheduled) step = model::Step{.index = index}; // the scheduler failed planning it
    finding = internal_assertion(runner_.layout(), step.index, e);
  }
  const SchedulerStats& s = scheduler_.stats();
  report_.steps = scheduled ? s.steps : index + 1;
  report_.request_steps = s.request_steps;
  report_.tokens = s.tokens;
  report_.finished = s.finished;
  report_.aborts = s.aborts;
  report_.preemptions = s.preemptions;
  report_.forced_preemptions = s.forced_preemptions;
  report_.resets = s.resets;
  report_.prefix_hits = s.prefix_hits;
  report_.first_finding = finding;
  last_step_ = std::move(step);
  last_record_ = std::move(record);
  return !finding && !scheduler_.done();
}

// The step as scheduled (and edited), in order: the block manager's rules on its tables, the
// ledger, the runner, the invariants after the step, the commit, the invariants after it.
std::optional<Finding> Engine::run_scheduled(const model::Step& step, StepRecord& record) {
  if (auto f = check_tables(step)) return f;
  if (auto f = execute_checked(step, record)) return f;
  scheduler_.update(step);
  const bool sweep = step.index % options_.cache_sweep_every == 0;
  return checker_.after_commit(step.index, scheduler_.blocks(), runner_, sweep,
                               report_.bytes_checked);
}

// Async, as vLLM's engine with one step in flight: N + 1 was planned while N (last_step_) ran.
// Its hand-outs are judged against what N can touch (the marks are gone once N completes), N
// completes and commits, N + 1 takes its true counts, and only then is any finding reported, so
// that the step a trace records is the one the runner would have run.
std::optional<Finding> Engine::run_planned_in_flight(model::Step& step, StepRecord& record) {
  const std::optional<Finding> tables = check_tables(step);
  if (in_flight_) scheduler_.update(last_step_);
  in_flight_ = false;
  scheduler_.finalize(step);
  if (tables) return tables;
  if (step.planned_during >= 0) {
    const bool sweep = step.planned_during % options_.cache_sweep_every == 0;
    if (auto f = checker_.after_commit(step.planned_during, scheduler_.blocks(), runner_, sweep,
                                       report_.bytes_checked))
      return f;
  }
  if (auto f = execute_checked(step, record)) return f;
  in_flight_accesses_.remember(step, record);
  in_flight_ = true;
  return std::nullopt;
}

std::optional<Finding> Engine::execute_checked(const model::Step& step, StepRecord& record) {
  if (auto mismatch = ledger_.begin_step(step))
    return make_finding(runner_.layout(), FindingKind::token_mismatch, step.index, "", -1, -1, -1,
                        *mismatch, "tokens that agree with the committed sequence");
  record = runner_.execute(step, ledger_);
  report_.bytes_checked += record.bytes_checked;
  for (const LaunchRecord& l : record.launches) {
    ++report_.launches;
    report_.copies_by_kind[std::string(model::to_string(l.kind))] +=
        static_cast<std::int64_t>(l.decisions.size());
  }
  if (record.finding) return record.finding;
  if (auto f = in_flight_accesses_.check(runner_.layout(), step, record)) return f;
  ledger_.end_step(step);
  return checker_.after_step(step, record, scheduler_.blocks(), runner_, ledger_,
                             report_.bytes_checked);
}

// The step may have been edited after the scheduler made it (a test, a scheduler mutant): its
// tables are held to the block manager's rules as a trace's are in replay, in replay's order
// (oracle/engine/replay.h): moved speculative blocks, the growth of running requests, then the
// first tables of resumed and of new requests, each with its prefix hit. With a step in flight
// (async), no block it hands out may be one held back for that step.
std::optional<Finding> Engine::check_tables(const model::Step& step) const {
  const model::Layout& layout = runner_.layout();
  if (auto f = check_spec_blocks_moved(layout, step,
                                       [this](const std::string& id) { return runner_.row(id); }))
    return f;
  const BlockManager& blocks = scheduler_.blocks();
  const HeldBack held_back = [&blocks](std::int32_t group, std::int32_t block) {
    return blocks.pool(group).held_back_touchable(block);
  };
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) continue;
    if (const model::GroupBlockIds* row = runner_.row(c.req_id))
      if (auto f = check_growth_handout(layout, step, c.req_id, *row, c.new_block_ids, held_back))
        return f;
    if (auto f = handed_out_held(step, c.req_id, c.new_block_ids, -1, false)) return f;
  }
  const auto first = [&](const std::string& id, const model::GroupBlockIds& table,
                         std::int32_t hit) -> std::optional<Finding> {
    for (const PrefixLookup& l : scheduler_.prefix_lookups())
      if (l.req_id == id) {
        if (auto f = check_prefix_hit(layout, step.index, id, hit, l.longest_tokens)) return f;
        break;
      } // not admitted by the scheduler this step: an edit added it
    if (auto f = check_first_handout(layout, step, id, table, hit, held_back)) return f;
    // The column of the state after the hit (a partial-hash hit's holds its private copy).
    const auto hit_col =
        static_cast<std::int32_t>(model::cdiv(hit, layout.config.mamba_block_size)) - 1;
    return handed_out_held(step, id, table, hit_col, true);
  };
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed)
      if (auto f = first(c.req_id, c.new_block_ids, c.num_computed_tokens)) return f;
  for (const model::NewRequestData& n : step.new_requests)
    if (auto f = first(n.req_id, n.block_ids, n.num_computed_tokens)) return f;
  return std::nullopt;
}

// The scheduler's own tables are right by construction; an edit may hand out a block another
// request holds, which replay's adoption of the same step refuses (BlockManager::adopt_first,
// adopt_growth): the same words here, at the same place in the step.
std::optional<Finding> Engine::handed_out_held(const model::Step& step, const std::string& req_id,
                                               const model::GroupBlockIds& listed, std::int32_t hit,
                                               bool first_table) const {
  if (!edited_) return std::nullopt; // the scheduler's own tables are its pool's
  const BlockManager& blocks = scheduler_.blocks();
  const RequestBlocks* own = blocks.find(req_id);
  const model::GroupBlockIds* row = first_table ? nullptr : runner_.row(req_id);
  const bool align = runner_.layout().config.mode == model::CacheMode::align;
  const std::int32_t nsb = runner_.layout().config.num_spec_blocks;
  for (std::size_t g = 0; g < listed.size() && g < blocks.pools().size(); ++g) {
    const std::vector<std::int32_t>* old_ids =
        row != nullptr && g < row->size() ? &(*row)[g] : nullptr;
    const std::size_t old_len = old_ids != nullptr ? old_ids->size() : 0;
    // The scheduler's own table of the request after the step (empty when it holds none).
    const std::span<const std::int32_t> own_ids = own != nullptr && g < own->groups.size()
                                                      ? std::span(own->groups[g].block_ids)
                                                      : std::span<const std::int32_t>{};
    for (std::size_t j = 0; j < listed[g].size(); ++j) {
      const std::int32_t block = listed[g][j];
      if (block == model::kNullBlockId || static_cast<std::int32_t>(j) == hit) continue;
      if (old_ids != nullptr && align &&
          std::find(old_ids->end() - std::min<std::ptrdiff_t>(nsb, old_len), old_ids->end(),
                    block) != old_ids->end())
        continue; // an old speculative block moving to the end
      const std::size_t col = first_table ? j : old_len + j;
      // Held by the request itself already (an earlier column of this table, or of its row),
      // or by another: the scheduler's own table accounts for one reference of its blocks.
      const bool own_block = std::ranges::find(own_ids, block) != own_ids.end();
      const auto earlier = listed[g].begin() + static_cast<std::ptrdiff_t>(j);
      // Still held at a column of its row before the step (the runner's row keeps the blocks
      // the request has given back; the scheduler's table after the step does not).
      const std::span<const std::int32_t> kept = own_ids.first(std::min(old_len, own_ids.size()));
      const bool seen = std::find(listed[g].begin(), earlier, block) != earlier ||
                        std::ranges::find(kept, block) != kept.end();
      // A copy's retention (block_pool.h) is no request's.
      const BlockPool& pool = blocks.pool(static_cast<std::int32_t>(g));
      const std::int32_t others =
          pool.ref_count(block) - pool.retained(block) - (own_block ? 1 : 0);
      const std::int32_t refs = others + (seen ? 1 : 0);
      if (refs == 0) continue;
      const std::string where =
          first_table ? fmt::format(" (position {} of {}'s first table)", j, req_id)
                      : fmt::format(" (appended to {}'s table at position {})", req_id, col);
      return make_finding(runner_.layout(), FindingKind::inconsistent_step, step.index, req_id, -1,
                          -1, -1, held_block_message(g, block, refs) + where,
                          first_table ? "a table the block manager could give" : "a free block");
    }
  }
  return std::nullopt;
}

EngineReport run_engine(const model::CacheConfig& config, const model::LayoutSpec& spec,
                        std::int64_t num_steps, std::int32_t num_requests, std::uint64_t seed,
                        const EngineOptions& options) {
  if (num_steps < 0 || num_steps > kStepsMax)
    model::fail_input("engine: num_steps must be in 0..{}, got {}", kStepsMax, num_steps);
  if (num_requests < 0 || num_requests > kRequestsMax)
    model::fail_input("engine: num_requests must be in 0..{}, got {}", kRequestsMax, num_requests);
  const model::Layout layout = model::build_layout(config, spec);
  validate_options(options, layout);
  auto rng = model::SplitMix64::from_seed(seed);
  std::vector<RequestSpec> requests =
      generate_workload(options.workload, num_requests, model::kSpecTokensMax + 2, rng);
  Engine engine(layout, std::move(requests), seed, options);
  for (std::int64_t i = 0; i < num_steps; ++i)
    if (!engine.step()) break;
  EngineReport report = engine.report();
  report.requests = num_requests;
  return report;
}

void force_acceptance(model::ScheduledRequest& row, std::int32_t num_computed,
                      const std::vector<std::int32_t>& truth, std::int32_t a) {
  MC_ASSERT(row.num_draft_tokens > 0);
  MC_ASSERT(a >= 1 && a <= 1 + row.num_draft_tokens);
  row.num_accepted_tokens = a;
  for (std::int32_t j = 0; j < row.num_draft_tokens; ++j) {
    const std::int32_t t = truth[static_cast<std::size_t>(num_computed + 1 + j)];
    row.token_ids[static_cast<std::size_t>(1 + j)] = j < a - 1 ? t : t + 1;
  }
}

} // namespace mc::oracle::engine
