#include "oracle/engine/driver.h"

#include "model/errors.h"
#include "oracle/engine/step_probe.h"
#include "oracle/engine/table_rules.h"

#include <fmt/format.h>

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
  model::Step step;
  StepRecord record;
  std::optional<Finding> finding;
  bool scheduled = false;
  try {
    const model::AssertionsReported reported; // a broken assumption of the model: a finding
    step = scheduler_.schedule(std::move(last_step_)); // its buffers, reused
    scheduled = true;
    if (edit) edit(step);
    probe_step(step.index);
    finding = run_scheduled(step, record);
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
  ledger_.end_step(step);
  if (auto f = checker_.after_step(step, record, scheduler_.blocks(), runner_, ledger_,
                                   report_.bytes_checked))
    return f;
  scheduler_.update(step);
  const bool sweep = step.index % options_.cache_sweep_every == 0;
  return checker_.after_commit(step.index, scheduler_.blocks(), runner_, sweep,
                               report_.bytes_checked);
}

// The step may have been edited after the scheduler made it (a test, a scheduler mutant): its
// tables are held to the block manager's rules as a trace's are in replay.
std::optional<Finding> Engine::check_tables(const model::Step& step) const {
  const model::Layout& layout = runner_.layout();
  if (auto f = check_spec_blocks_moved(layout, step,
                                       [this](const std::string& id) { return runner_.row(id); }))
    return f;
  const auto check = [&](const std::string& id, std::int32_t hit) -> std::optional<Finding> {
    for (const PrefixLookup& l : scheduler_.prefix_lookups())
      if (l.req_id == id) return check_prefix_hit(layout, step.index, id, hit, l.longest_tokens);
    return std::nullopt; // not admitted by the scheduler this step: an edit added it
  };
  for (const model::CachedRequestData& c : step.cached_requests)
    if (c.resumed)
      if (auto f = check(c.req_id, c.num_computed_tokens)) return f;
  for (const model::NewRequestData& n : step.new_requests)
    if (auto f = check(n.req_id, n.num_computed_tokens)) return f;
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
  EngineReport report;
  for (std::int64_t i = 0; i < num_steps; ++i)
    if (!engine.step()) break;
  report = engine.report();
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
