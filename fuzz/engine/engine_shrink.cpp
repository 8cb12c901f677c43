// The bounded shrinker of engine cases (engine_fuzz.h): greedy, first improvement wins, the
// candidate list rebuilt from the case kept. Every candidate is a strict simplification (fewer
// or shorter things, smaller numbers, simpler options), so the search ends; the limits on
// candidates and time bound it too. A candidate is kept only if it fails with the same
// signature.
#include "fuzz/engine/engine_fuzz.h"

#include "model/errors.h"
#include "model/interrupt.h"
#include "model/stamps.h"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace mc::fuzz {
namespace {

struct Candidate {
  EngineCase c;
  bool must_fail_sooner = false; // not simpler (another scheduler seed): kept only if it fails sooner
};
using Candidates = std::vector<Candidate>;

constexpr std::uint64_t kSchedulerSeedTries = 24;
// A simplification of the workload also moves every later draw of the scheduler (drafts,
// acceptance, aborts), so each one is tried with a few other scheduler seeds too.
constexpr std::uint64_t kReseedsPerWorkloadChange = 3;

void add(Candidates& out, EngineCase c) {
  fit_workload_bounds(c);
  out.push_back({std::move(c)});
}

// `c` with one change.
template <typename Change> void add_changed(Candidates& out, const EngineCase& c, Change change) {
  EngineCase a = c;
  change(a);
  add(out, std::move(a));
}

void add_reseeded(Candidates& out, EngineCase c) {
  fit_workload_bounds(c);
  for (std::uint64_t k = 1; k <= kReseedsPerWorkloadChange; ++k) {
    EngineCase r = c;
    r.scheduler_seed = model::mix64(c.scheduler_seed ^ (k * 0x9E3779B97F4A7C15ULL));
    out.push_back({std::move(r)});
  }
  out.insert(out.end() - static_cast<std::ptrdiff_t>(kReseedsPerWorkloadChange), {std::move(c)});
}

void request_candidates(const EngineCase& c, Candidates& out) {
  const std::size_t n = c.requests.size();
  if (n >= 4) // the later half, then the earlier half
    add_changed(out, c, [n](EngineCase& a) { a.requests.resize(n / 2); });
  for (std::size_t i = n; i-- > 0 && n > 1;)
    add_changed(out, c, [i](EngineCase& a) {
      a.requests.erase(a.requests.begin() + static_cast<std::ptrdiff_t>(i));
    });
  if (n > 0 && c.requests.back().arrival_step > 0) {
    EngineCase a = c;
    for (auto& r : a.requests)
      r.arrival_step = 0;
    add_reseeded(out, std::move(a));
  }
  for (std::size_t i = 1; i < n; ++i)
    if (c.requests[i].arrival_step > c.requests[i - 1].arrival_step) {
      EngineCase a = c;
      for (std::size_t j = i; j < n; ++j)
        a.requests[j].arrival_step -= c.requests[i].arrival_step - c.requests[i - 1].arrival_step;
      add_reseeded(out, std::move(a));
    }
}

// Smaller values of one length, largest step first: 1, half, minus one.
std::vector<std::int32_t> smaller(std::int32_t value, std::int32_t lo) {
  std::vector<std::int32_t> out;
  for (const std::int32_t v : {lo, lo + (value - lo) / 2, value - 1})
    if (v >= lo && v < value && std::find(out.begin(), out.end(), v) == out.end())
      out.push_back(v);
  return out;
}

void length_candidates(const EngineCase& c, Candidates& out) {
  for (std::size_t i = 0; i < c.requests.size(); ++i) {
    const oracle::engine::RequestSpec& r = c.requests[i];
    const std::int32_t output = r.max_len - r.num_prompt_tokens;
    for (const std::int32_t p : smaller(r.num_prompt_tokens, 1)) {
      EngineCase a = c;
      a.requests[i].num_prompt_tokens = p;
      a.requests[i].max_len = p + output;
      add_reseeded(out, std::move(a));
    }
    for (const std::int32_t o : smaller(output, 1)) {
      EngineCase a = c;
      a.requests[i].max_len = r.num_prompt_tokens + o;
      add_reseeded(out, std::move(a));
    }
  }
}

void config_candidates(const EngineCase& c, Candidates& out) {
  for (const std::int32_t s : smaller(c.config.num_spec_tokens, 0)) {
    EngineCase a = c;
    a.config.num_spec_tokens = s;
    a.config.num_spec_blocks = s; // one speculative block per draft, in both modes
    if (s == 0) {
      a.engine.scheduler.drafter_prunes_last_block = false;
      a.engine.scheduler.pad_prompt_tails = false;
    }
    add(out, std::move(a));
  }
  for (const std::int32_t b : smaller(static_cast<std::int32_t>(c.spec.num_blocks), 4))
    add_changed(out, c, [b](EngineCase& a) { a.spec.num_blocks = b; });
  const std::int32_t budget_min =
      std::max(c.config.mamba_block_size, 1 + c.config.num_spec_tokens);
  for (const std::int32_t t : smaller(c.engine.scheduler.token_budget, budget_min))
    add_changed(out, c, [t](EngineCase& a) { a.engine.scheduler.token_budget = t; });
  for (const std::int32_t m : smaller(c.engine.scheduler.max_running, 1))
    add_changed(out, c, [m](EngineCase& a) { a.engine.scheduler.max_running = m; });
  for (std::size_t g = 0; g < c.spec.groups.size(); ++g) {
    if (c.spec.groups.size() > 1)
      add_changed(out, c, [g](EngineCase& a) {
        a.spec.groups.erase(a.spec.groups.begin() + static_cast<std::ptrdiff_t>(g));
        a.preset_layout = false;
      });
    if (c.spec.groups[g].num_layers > 1)
      add_changed(out, c, [g](EngineCase& a) {
        a.spec.groups[g].num_layers = 1;
        a.preset_layout = false;
      });
  }
  for (const std::int32_t b : smaller(c.config.mamba_block_size, 1 + c.config.num_spec_tokens)) {
    EngineCase a = c;
    a.config.mamba_block_size = b;
    // A hash unit stays a proper divisor of the block size, or partial hits are off.
    if (const std::int32_t unit = c.engine.scheduler.hash_block_size; unit != 0) {
      const std::int32_t kept = std::gcd(unit, b);
      a.engine.scheduler.hash_block_size = kept < b ? kept : 0;
    }
    add(out, std::move(a));
  }
}

void option_candidates(const EngineCase& c, Candidates& out) {
  const auto variant = [&](auto change) { add_changed(out, c, change); };
  const oracle::engine::SchedulerOptions& s = c.engine.scheduler;
  if (s.reset_prefix_cache_per_million > 0)
    variant([](EngineCase& a) { a.engine.scheduler.reset_prefix_cache_per_million = 0; });
  if (s.abort_per_million > 0)
    variant([](EngineCase& a) { a.engine.scheduler.abort_per_million = 0; });
  if (s.async_scheduling)
    variant([](EngineCase& a) { a.engine.scheduler.async_scheduling = false; });
  if (s.drafter_prunes_last_block)
    variant([](EngineCase& a) { a.engine.scheduler.drafter_prunes_last_block = false; });
  if (s.pad_prompt_tails)
    variant([](EngineCase& a) { a.engine.scheduler.pad_prompt_tails = false; });
  if (s.hash_block_size != 0)
    variant([](EngineCase& a) { a.engine.scheduler.hash_block_size = 0; });
  if (s.full_drafts_per_million < 1'000'000)
    variant([](EngineCase& a) { a.engine.scheduler.full_drafts_per_million = 1'000'000; });
  if (c.config.conv_layout == model::ConvLayout::DS)
    variant([](EngineCase& a) { a.config.conv_layout = model::ConvLayout::SD; });
  if (c.engine.runner.v1_copy_path == oracle::engine::V1CopyPath::batch_copy)
    variant([](EngineCase& a) { a.engine.runner.v1_copy_path = oracle::engine::V1CopyPath::precopy; });
  if (c.engine.runner.row_stride_extra > 0)
    variant([](EngineCase& a) { a.engine.runner.row_stride_extra = 0; });
}

Candidates candidates_of(const EngineCase& c, std::int64_t steps_run) {
  Candidates out;
  if (c.num_steps > steps_run)
    add_changed(out, c, [steps_run](EngineCase& a) { a.num_steps = steps_run; });
  request_candidates(c, out);
  config_candidates(c, out);
  length_candidates(c, out);
  option_candidates(c, out);
  // Other draws of drafts, acceptance, aborts and resets: kept only when they fail sooner.
  for (std::uint64_t k = 1; k <= kSchedulerSeedTries; ++k) {
    EngineCase a = c;
    a.scheduler_seed = model::mix64(c.scheduler_seed + k);
    fit_workload_bounds(a);
    out.push_back({std::move(a), true});
  }
  return out;
}

} // namespace

ShrinkResult shrink_engine_case(const EngineCase& failing, const EngineOutcome& outcome,
                                const EngineRunOptions& run, const ShrinkLimits& limits,
                                int runs_per_candidate) {
  MC_ASSERT(outcome.failed());
  MC_ASSERT(runs_per_candidate >= 1);
  MC_ASSERT(limits.candidates_max >= 0);
  const auto start = std::chrono::steady_clock::now();
  ShrinkResult r{.best = failing, .outcome = outcome};
  auto out_of_time = [&] {
    if (model::interrupted()) return true;
    if (limits.seconds_max > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            limits.seconds_max)
      r.timed_out = true;
    return r.timed_out;
  };
  const std::string key = engine_signature(failing, *outcome.failure).key();
  const auto fails_so = [&key](const EngineCase& c, const EngineOutcome& o) {
    return o.failed() && engine_signature(c, *o.failure).key() == key;
  };
  bool progress = true;
  // A device fault in this process ends the shrink where it is: every later candidate would
  // fail in its first allocation.
  while (progress && r.tried < limits.candidates_max && !out_of_time() &&
         runs_here_possible(run)) {
    progress = false;
    for (Candidate& next : candidates_of(r.best, r.outcome.steps_run)) {
      EngineCase& candidate = next.c;
      if (r.tried >= limits.candidates_max || out_of_time() || !runs_here_possible(run)) break;
      ++r.tried;
      EngineOutcome o = run_engine_case(candidate, run);
      for (int again = 1; again < runs_per_candidate && !fails_so(candidate, o); ++again)
        o = run_engine_case(candidate, run);
      if (!fails_so(candidate, o)) continue;
      if (next.must_fail_sooner && o.steps_run >= r.outcome.steps_run)
        continue; // not simpler, so it must fail sooner (this also ends the search)
      if (candidate.num_steps > o.steps_run) candidate.num_steps = o.steps_run;
      r.best = std::move(candidate);
      r.outcome = std::move(o);
      r.chain.emplace_back(r.best, r.outcome);
      ++r.accepted;
      progress = true;
      break;
    }
  }
  MC_ASSERT(fails_so(r.best, r.outcome));
  return r;
}

} // namespace mc::fuzz
