// run_engine_fuzz, the counterexample files and the JSON report (engine_fuzz.h).
#include "fuzz/engine/engine_fuzz.h"

#include "gpu/mutant.h"
#include "harness/managed_steps.h"
#include "harness/replay.h"

#include "model/errors.h"
#include "model/output_file.h"
#include "model/process.h"
#include "scenarios/trace.h"
#include "show/pictures.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>

namespace mc::fuzz {
namespace {

std::string runner_key(const EngineCase& c) {
  if (c.config.mode == model::CacheMode::all) return "all";
  const model::RunnerOptions& r = c.engine.runner;
  if (r.flavour == model::RunnerFlavour::v2) {
    if (r.v2_table_rows == model::V2TableRows::batch_row) return "v2";
    return r.deferred_postprocess ? "v2 slot-tables deferred" : "v2 slot-tables";
  }
  return fmt::format("v1 {}", model::to_string(r.v1_copy_path));
}

std::string backend_args(const CampaignOptions& o) {
  return o.backend_args.empty() ? fmt::format("--backend {}", o.backend_name) : o.backend_args;
}

// The mutants as --mutant options; a replay takes no scheduler mutant (`scheduler` false): the
// trace holds the steps it sent.
std::string mutant_args(const EngineLevelOptions& o, bool scheduler = true) {
  std::string out;
  if (o.run.runner_mutant != gpu::engine::RunnerMutant::none)
    out += fmt::format(" --mutant {}", gpu::engine::to_string(o.run.runner_mutant));
  if (o.run.kernel_mutant != gpu::Mutant::none)
    out += fmt::format(" --mutant {}", gpu::to_string(o.run.kernel_mutant));
  if (scheduler && o.run.scheduler_mutant != harness::SchedulerMutant::none)
    out += fmt::format(" --mutant {}", harness::to_string(o.run.scheduler_mutant));
  return out;
}

// Reruns plan through the same block manager; a replay needs none (the trace holds its tables).
std::string manager_args(const EngineLevelOptions& o) {
  if (o.run.block_manager.empty()) return {};
  std::string out = fmt::format(" --block-manager {}", model::shell_quote(o.run.block_manager));
  if (o.run.block_manager_timeout != 60.0)
    out += fmt::format(" --block-manager-timeout {}", o.run.block_manager_timeout);
  return out;
}

// `mambacheck replay`'s options for the run of case `c` (the trace holds config and steps).
std::string replay_args(const CampaignOptions& campaign, const EngineLevelOptions& o,
                        const EngineCase& c) {
  std::string out = " " + backend_args(campaign);
  const model::RunnerOptions& r = c.engine.runner;
  if (r.flavour == model::RunnerFlavour::v1 &&
      r.v1_copy_path != oracle::engine::V1CopyPath::precopy)
    out += fmt::format(" --v1-copy {}", model::to_string(r.v1_copy_path));
  if (r.flavour == model::RunnerFlavour::v2 && r.v2_table_rows != model::V2TableRows::batch_row)
    out += fmt::format(" --v2-tables {}", model::to_string(r.v2_table_rows));
  if (r.flavour == model::RunnerFlavour::v2 && r.deferred_postprocess)
    out += " --deferred-postprocess";
  return out + mutant_args(o, false);
}

// Writes `steps` of case `c` as a trace; returns what went wrong, or an empty string.
// With a block manager under test the steps are the ones planned through it, the case's pool
// grown for it and the header its contract.
std::string write_trace(const std::filesystem::path& file, const EngineCase& case_planned,
                        const EngineLevelOptions& o, std::int64_t steps_max) {
  model::SchedulerContract contract;
  std::vector<model::Step> steps;
  try {
    steps = oracle_steps(case_planned, steps_max, o.run.scheduler_mutant, o.run.manager, &contract);
  } catch (const oracle::engine::KvManagerFault& e) {
    return e.message;
  }
  const EngineCase c = with_manager_pool(case_planned, o.run.manager);
  scenarios::TraceHeader header;
  header.config = c.config;
  header.config.runner = c.engine.runner.flavour;
  header.preset = c.preset_layout ? c.preset : "";
  header.layout_spec = c.spec;
  if (o.run.manager != nullptr)
    harness::set_manager_contract(header, contract, c.engine.scheduler.async_scheduling);
  else if (c.engine.scheduler.async_scheduling)
    scenarios::set_async_model_contract(header);
  if (o.run.manager == nullptr)
    scenarios::set_hash_unit(header, c.engine.scheduler.hash_block_size);
  header.source = {{"tool", "mambacheck fuzz --level engine"},
                   {"case_seed", c.case_seed},
                   {"size", c.size},
                   {"v1_copy_path", model::to_string(c.engine.runner.v1_copy_path)},
                   {"v2_table_rows", model::to_string(c.engine.runner.v2_table_rows)},
                   {"deferred_postprocess", c.engine.runner.deferred_postprocess},
                   {"row_stride_extra", c.engine.runner.row_stride_extra},
                   {"runner_mutant", std::string(gpu::engine::to_string(o.run.runner_mutant))},
                   {"kernel_mutant", std::string(gpu::to_string(o.run.kernel_mutant))},
                   {"scheduler_mutant", std::string(harness::to_string(o.run.scheduler_mutant))}};
  if (!o.run.block_manager.empty()) header.source["block_manager"] = o.run.block_manager;
  try {
    scenarios::TraceWriter writer(file, header);
    for (const model::Step& step : steps)
      writer.write(step);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

nlohmann::ordered_json counterexample_json(const EngineCounterexample& cx) {
  return {{"case_seed", cx.case_seed},
          {"size", cx.size},
          {"failure_kind", cx.failure_kind},
          {"first_difference", to_json(cx.difference)},
          {"original_failure", cx.original_failure},
          {"original_steps", cx.original_steps},
          {"original_requests", cx.original_requests},
          {"steps", cx.steps},
          {"requests", cx.requests},
          {"shrink_steps", cx.shrink_steps},
          {"shrink_tried", cx.shrink_tried},
          {"shrunk_case", to_json(cx.shrunk)},
          {"case", cx.description},
          {"original_trace", cx.original_trace.generic_string()},
          {"shrunk_trace", cx.shrunk_trace.generic_string()},
          {"reproduce", cx.reproduce},
          {"replay", cx.replay},
          {"steps_view", cx.steps_view.generic_string()},
          {"shrunk", cx.shrink_kept},
          {"shrink_timed_out", cx.shrink_timed_out},
          {"signature", cx.signature},
          {"rate", fmt::format("{} ({})", cx.saved_runs.summary(),
                               to_string(cx.saved_runs.classify()))},
          {"picture", cx.picture.generic_string()}};
}

std::string counterexample_text(const EngineCounterexample& cx) {
  const harness::Difference& d = cx.difference;
  std::string where = fmt::format("step {}", d.step);
  if (d.launch >= 0) where += fmt::format(", launch {} ({})", d.launch, d.launch_kind);
  if (!d.request.empty()) where += fmt::format(", request {}", d.request);
  if (!d.array.empty()) where += fmt::format(", array {}", d.array);
  if (d.tensor >= 0)
    where += fmt::format(", group {} layer {} state {} (tensor {})", d.group, d.layer, d.state,
                         d.tensor);
  if (d.block >= 0) where += fmt::format(", block {}", d.block);
  if (d.byte_begin >= 0) where += fmt::format(", bytes [{}, {})", d.byte_begin, d.byte_end);
  return fmt::format(
      "engine-level counterexample (case seed {}, size {})\n"
      "failure ({}): {}\nfirst difference: {}\n"
      "shrunk from {} steps and {} requests to {} steps and {} requests ({} shrinks, {} "
      "candidates tried)\ncase: {}\nbefore shrinking: {}\n"
      "trace: {} (before shrinking: {})\nsteps as the oracle saw them: {}\nreproduce: {}\n"
      "replay: {}\nthe saved case {}{}\n",
      cx.case_seed, cx.size, cx.failure_kind, cx.failure, where, cx.original_steps,
      cx.original_requests, cx.steps, cx.requests, cx.shrink_steps, cx.shrink_tried, cx.description,
      cx.original_failure, cx.shrunk_trace.generic_string(), cx.original_trace.generic_string(),
      cx.steps_view.empty() ? "(not written)" : cx.steps_view.generic_string(), cx.reproduce,
      cx.replay, cx.saved_runs.summary(),
      cx.shrink_kept ? "" : " (no smaller case failed on half of its reruns: the original)");
}

// The shrunk trace on the oracle alone, each step's view as one JSON line (harness/step_view.h):
// what the oracle believes happened at each of its steps.
bool write_steps_view(const std::filesystem::path& trace, const EngineCase& c,
                      const std::filesystem::path& file) {
  std::ofstream out(file, std::ios::trunc);
  if (!out) return false;
  harness::ReplayOptions options{.v1_copy_path = c.engine.runner.v1_copy_path,
                                 .v2_table_rows = c.engine.runner.v2_table_rows,
                                 .deferred_postprocess = c.engine.runner.deferred_postprocess};
  options.on_view = [&out](const harness::StepView& v) { out << to_json(v).dump() << '\n'; };
  try {
    harness::view_trace_file(trace, options); // the oracle alone: no code under test here
  } catch (const model::InputError&) {
    return false; // the trace was written by this build: only a generator bug gets here
  }
  out.close(); // a write that fails only when the last of the buffer goes out counts too
  return static_cast<bool>(out);
}

// The fixed sizes, and the boosts a steered campaign drew case `c` with.
std::string fixed_args(const EngineCaseFixed& fixed, const EngineCase& c) {
  std::string args;
  if (fixed.block_size) args += fmt::format(" --block-size {}", *fixed.block_size);
  if (fixed.token_budget) args += fmt::format(" --token-budget {}", *fixed.token_budget);
  if (fixed.async_scheduling) args += " --async";
  if (c.steer.any()) args += fmt::format(" --steer-boosts {}", to_string(c.steer));
  return args;
}

// The backend threw or its process died: not a wrong byte but no result at all.
bool is_backend_error(const harness::Difference& d) {
  return d.kind == "backend-error" || d.kind == "device-fault" || d.kind == "crash" ||
         d.kind == "timeout";
}

// The saved case: the smallest accepted candidate that fails with the finding's key on at
// least half of its reruns, or the original (which failed at least on the run that found it).
void keep_reproducible(ShrinkResult& s, const EngineCase& original,
                       const EngineOutcome& original_outcome, const RunTally& original_runs,
                       const EngineRunOptions& run, int reruns, RunTally& saved_runs,
                       bool& kept) {
  const std::string key = engine_signature(original, *original_outcome.failure).key();
  for (std::size_t i = s.chain.size(); i-- > 0 && runs_here_possible(run);) {
    RunTally tally;
    int same = 0; // runs failing with this finding's key
    for (int k = 0; k < reruns; ++k) {
      const EngineOutcome again = run_engine_case(s.chain[i].first, run);
      const std::string again_key =
          again.failed() ? engine_signature(s.chain[i].first, *again.failure).key() : key;
      if (again.failed() && again_key == key) ++same;
      add_run(tally, again.failed() ? std::optional(again.failure->text) : std::nullopt,
              again_key, key, again.failed() && is_backend_error(*again.failure));
    }
    if (reproducible(same, reruns)) {
      s.best = s.chain[i].first;
      s.outcome = s.chain[i].second;
      saved_runs = std::move(tally);
      kept = true;
      return;
    }
  }
  s.best = original;
  s.outcome = original_outcome;
  saved_runs = original_runs;
  kept = false;
}

// report.html beside report.txt: the shrunk trace replayed against the backend under test
// (with the campaign's kernel and runner mutants; a scheduler mutant's steps are in the trace).
std::filesystem::path write_engine_picture(const EngineCounterexample& cx,
                                           const CampaignOptions& campaign,
                                           const EngineLevelOptions& o, const EngineCase& c) {
  show::EnginePictureOptions p{
      .isolate = campaign.isolate && o.run.external == nullptr ? run_isolated_payload : nullptr};
  p.replay.executor = o.run.executor;
  p.replay.external = o.run.external;
  p.replay.v1_copy_path = c.engine.runner.v1_copy_path;
  p.replay.kernel_mutant = o.run.kernel_mutant;
  p.replay.runner_mutant = o.run.runner_mutant;
  p.actual_name = fmt::format("{}{}", campaign.backend_name, mutant_args(o));
  p.header = {.title = fmt::format("engine counterexample: case seed {}, {} steps, {} requests",
                                   cx.case_seed, cx.steps, cx.requests),
              .source = cx.shrunk_trace.generic_string(),
              .failure = cx.failure,
              .signature = engine_signature(c, cx.difference).to_string(),
              .rate = fmt::format("{} ({})", cx.saved_runs.summary(),
                                  to_string(cx.saved_runs.classify())),
              .reproduce = fmt::format("{}\n(the trace: {})", cx.reproduce, cx.replay)};
  const std::filesystem::path file = cx.dir / "report.html";
  try {
    return show::write_picture(file, show::engine_picture(cx.shrunk_trace, p))
               ? file
               : std::filesystem::path();
  } catch (const std::exception&) {
    return {}; // a picture is an extra: the trace and the reports stand without it
  }
}

// `can_rerun` false: the device context is lost, nothing more runs in this process; the
// original case is saved unshrunk.
EngineCounterexample make_counterexample(const CampaignOptions& o, const EngineLevelOptions& e,
                                         const EngineCase& c, const EngineOutcome& outcome,
                                         const RunTally& runs, bool can_rerun) {
  const EngineRunOptions& run = e.run;
  ShrinkResult s{.best = c, .outcome = outcome};
  RunTally saved_runs = runs;
  bool kept = false;
  if (can_rerun) {
    s = shrink_engine_case(c, outcome, run, o.shrink, candidate_runs(runs));
    keep_reproducible(s, c, outcome, runs, run, std::max(o.reruns, 1), saved_runs, kept);
  }
  EngineCounterexample cx{.case_seed = c.case_seed,
                          .size = c.size,
                          .failure_kind = s.outcome.failure->kind,
                          .failure = s.outcome.failure->text,
                          .difference = *s.outcome.failure,
                          .original_failure = outcome.failure->text,
                          .original_steps = outcome.steps_run,
                          .original_requests = static_cast<std::int64_t>(c.requests.size()),
                          .steps = s.outcome.steps_run,
                          .requests = static_cast<std::int64_t>(s.best.requests.size()),
                          .shrink_steps = kept ? s.accepted : 0,
                          .shrink_tried = s.tried,
                          .shrunk = s.best,
                          // the sizes it ran at: a manager's geometry where one planned it
                          .description = describe(with_manager_pool(s.best, run.manager)),
                          .saved_runs = std::move(saved_runs),
                          .shrink_kept = kept,
                          .shrink_timed_out = s.timed_out};
  cx.reproduce =
      fmt::format("mambacheck fuzz --level engine {} --seed {} --cases 1 "
                  "--max-size {}{}{}",
                  backend_args(o), c.case_seed, o.max_size, fixed_args(e.fixed, c),
                  mutant_args(e) + manager_args(e));
  if (o.out_dir.empty()) return cx;
  cx.dir = o.out_dir / fmt::format("engine-seed{}", c.case_seed);
  std::filesystem::create_directories(cx.dir);
  cx.original_trace = cx.dir / "original.jsonl";
  cx.shrunk_trace = cx.dir / "trace.jsonl";
  cx.replay = fmt::format("mambacheck replay {}{}", cx.shrunk_trace.generic_string(),
                          replay_args(o, e, s.best));
  // A scheduler mutant's steps are what its scheduler sent: the traces hold them as they ran.
  std::string problem = write_trace(cx.original_trace, c, e, outcome.steps_run);
  if (problem.empty()) problem = write_trace(cx.shrunk_trace, s.best, e, s.outcome.steps_run);
  if (!problem.empty()) cx.replay = fmt::format("(trace not written: {})", problem);
  if (problem.empty() && write_steps_view(cx.shrunk_trace, s.best, cx.dir / "steps.jsonl"))
    cx.steps_view = cx.dir / "steps.jsonl";
  cx.signature = engine_signature(s.best, cx.difference).to_string();
  if (problem.empty() && runs_here_possible(run)) cx.picture = write_engine_picture(cx, o, e, s.best);
  model::write_whole_file(cx.dir / "report.json", counterexample_json(cx).dump(2) + "\n");
  model::write_whole_file(cx.dir / "report.txt", counterexample_text(cx));
  return cx;
}

} // namespace

Signature engine_signature(const EngineCase& c, const harness::Difference& d) {
  Signature s{.level = "engine"};
  if (!d.launch_kind.empty())
    s.kind = d.launch_kind;
  else if (d.is_finding())
    s.kind = "oracle-check";
  else
    s.kind = "step";
  s.difference = d.kind == "array" && !d.array.empty() ? "array-" + d.array : d.kind;
  std::string runner = runner_key(c);
  std::replace(runner.begin(), runner.end(), ' ', '-');
  s.shape = runner;
  s.features = {runner};
  return s;
}

namespace {

// The first case of a new signature: rerun, classify, shrink, save.
void record_finding(const CampaignOptions& o, const EngineLevelOptions& e, const EngineCase& c,
                    const EngineOutcome& outcome, Finding& f) {
  const EngineRunOptions& run = e.run;
  const std::string key = f.signature.key();
  f.runs.add(outcome.failure->text, is_backend_error(*outcome.failure));
  // A fault in this process (the case's own rerun, or an earlier finding's) loses its CUDA
  // context: what ran is reported, nothing more runs here.
  bool device_lost = outcome.failure->kind == "device-fault" || !runs_here_possible(run);
  for (int i = 0; i < o.reruns && !device_lost; ++i) {
    const EngineOutcome again = run_engine_case(c, run);
    device_lost = !runs_here_possible(run);
    add_run(f.runs, again.failed() ? std::optional(again.failure->text) : std::nullopt,
            again.failed() ? engine_signature(c, *again.failure).key() : key, key,
            again.failed() && is_backend_error(*again.failure));
  }
  f.signature.classification = f.runs.classify();
  if (f.skipped) return;
  EngineCounterexample cx = make_counterexample(o, e, c, outcome, f.runs, !device_lost);
  f.counterexample_json = nlohmann::json::parse(counterexample_json(cx).dump());
  f.saved_runs = cx.saved_runs;
  f.description = cx.description;
  f.reproduce = cx.reproduce;
  f.counterexample_dir = cx.dir;
  f.counterexample = std::move(cx);
}

// Case `index` of a campaign: case seed seed + index at size `case seed % (max_size + 1)`.
int size_of(std::uint64_t case_seed, int max_size) {
  return static_cast<int>(case_seed % static_cast<std::uint64_t>(max_size + 1));
}

nlohmann::json run_options_json(const EngineRunOptions& run) {
  return {{"executor", run.executor == model::Backend::cuda ? "cuda" : "host"},
          {"kernel_mutant", gpu::to_string(run.kernel_mutant)},
          {"runner_mutant", gpu::engine::to_string(run.runner_mutant)},
          {"scheduler_mutant", harness::to_string(run.scheduler_mutant)},
          {"block_manager", run.block_manager},
          {"block_manager_timeout", run.block_manager_timeout}};
}

EngineRunOptions run_options_from_json(const nlohmann::json& j) {
  const auto named = [&j](const char* field, auto find) {
    const std::string name = j.at(field).get<std::string>();
    const auto found = find(name);
    MC_ASSERT(found.has_value());
    return *found;
  };
  EngineRunOptions run;
  run.executor = j.at("executor") == "cuda" ? model::Backend::cuda
                                            : model::Backend::host;
  if (j.at("kernel_mutant") != "none")
    run.kernel_mutant = named("kernel_mutant", gpu::find_kernel_mutant);
  if (j.at("runner_mutant") != "none")
    run.runner_mutant = named("runner_mutant", gpu::engine::find_runner_mutant);
  if (j.at("scheduler_mutant") != "none")
    run.scheduler_mutant = named("scheduler_mutant", harness::find_scheduler_mutant);
  run.block_manager = j.value("block_manager", "");
  run.block_manager_timeout = j.value("block_manager_timeout", 60.0);
  return run;
}

std::string scheduling_key(const EngineCase& c) {
  return c.engine.scheduler.async_scheduling ? "async" : "sync";
}

// What the level keeps of a case beside the runner's CaseResult: the case itself where this
// process generated it (run here, or a case that failed), else what the worker said it was.
struct EngineCaseDetail {
  EngineOutcome outcome;
  std::optional<EngineCase> c;
  std::string preset;
  std::string runner;
  std::string scheduling; // sync, async
};

CaseResult result_of(EngineCaseDetail d) {
  CaseResult r;
  if (d.outcome.failed()) {
    r.failure = d.outcome.failure->text;
    MC_ASSERT(d.c.has_value());
    r.signature = engine_signature(*d.c, *d.outcome.failure);
  }
  r.detail = std::move(d);
  return r;
}

CaseResult result_of(EngineCase c, EngineOutcome outcome) {
  EngineCaseDetail d{.outcome = std::move(outcome),
                     .preset = c.preset,
                     .runner = runner_key(c),
                     .scheduling = scheduling_key(c)};
  d.c = std::move(c);
  return result_of(std::move(d));
}

const EngineCaseDetail& detail_of(const CaseResult& r) {
  return std::any_cast<const EngineCaseDetail&>(r.detail);
}

} // namespace

struct EngineLevel::State {
  const CampaignOptions& campaign;
  EngineLevelOptions options;
  EngineCaseFixed fixed; // the campaign's, with the boosts of the cases now started
  SteerTally tally;      // what the cases counted so far reached, case by case
  std::int64_t epoch_started = 0; // the epoch whose boosts the cases now start with
  double barrier_since = -1.0; // when the epoch start began waiting; negative: not waiting
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

void check_engine_options(const CampaignOptions& o, const EngineLevelOptions& e) {
  if (o.max_size < 0 || o.max_size > kEngineSizeMax)
    model::fail_input("--max-size: expected 0..{}, got {}", kEngineSizeMax, o.max_size);
  if (o.cases_max < 0) model::fail_input("--cases: got {}", o.cases_max);
  validate_fixed(e.fixed);
  if (e.steer_epoch < 0)
    model::fail_input("--steer-epoch: expected at least 1, got {}", e.steer_epoch);
  const bool steering = e.steer_epoch > 0;
  if (steering && !o.shard.whole())
    model::fail_input("--steer: not with a shard (shard {} of {}): a shard does not see the other "
                      "shards' coverage counts, which decide the draws",
                      o.shard.index, o.shard.count);
  if (steering && o.first_case > 0)
    model::fail_input("--steer: not with --resume-from: the boosts of the resumed epoch come from "
                      "the coverage of cases this run would not run");
  if (steering && e.fixed.steer.any())
    model::fail_input("--steer and --steer-boosts: give one of them");
}

EngineLevel::EngineLevel(const CampaignOptions& o, EngineLevelOptions e) {
  check_engine_options(o, e);
  e.run.isolate = o.isolate && e.run.external == nullptr && e.run.manager == nullptr;
  e.run.timeout_seconds = o.case_timeout_seconds;
  const EngineCaseFixed fixed = e.fixed;
  state_.reset(new State{.campaign = o, .options = std::move(e), .fixed = fixed});
}

EngineLevel::~EngineLevel() = default;

std::int64_t EngineLevel::steer_epoch() const { return state_->options.steer_epoch; }

void set_engine_mutant(const std::string& name, EngineLevelOptions& o) {
  if (name.empty() || name == "none") return;
  const gpu::MutantInfo* info = gpu::find_mutant(name);
  if (info == nullptr)
    model::fail_input("--mutant: no kernel, runner or scheduler mutant named '{}' (see "
                      "mambacheck mutants --list)",
                      name);
  switch (info->level) {
  case gpu::MutantLevel::runner:
    o.run.runner_mutant = *gpu::engine::find_runner_mutant(name);
    break;
  case gpu::MutantLevel::scheduler:
    o.run.scheduler_mutant = *harness::find_scheduler_mutant(name);
    break;
  case gpu::MutantLevel::kernel:
    o.run.kernel_mutant = *gpu::find_kernel_mutant(name);
    break;
  }
}

int EngineLevel::size_of(std::int64_t, std::uint64_t case_seed) const {
  return fuzz::size_of(case_seed, state_->campaign.max_size);
}

nlohmann::json EngineLevel::worker_setup() const {
  return {{"run", run_options_json(state_->options.run)}, {"fixed", to_json(state_->fixed)}};
}

CaseResult EngineLevel::run_here(const CaseRef& ref) {
  EngineCase c = generate_engine_case(ref.case_seed, ref.size, state_->fixed);
  EngineOutcome outcome = run_engine_case(c, state_->options.run);
  for (int again = 1; again < state_->campaign.repeat && outcome.valid && !outcome.failed();
       ++again)
    outcome = run_engine_case(c, state_->options.run);
  return result_of(std::move(c), std::move(outcome));
}

CaseResult EngineLevel::from_worker(const CaseRef& ref, const IsolatedOutcome& outcome) {
  EngineOutcome o = isolated_engine_outcome(outcome);
  if (outcome.returned() && o.valid && !o.failed()) {
    const nlohmann::json j = nlohmann::json::parse(outcome.payload);
    return result_of(EngineCaseDetail{.outcome = std::move(o),
                                      .preset = j.at("preset").get<std::string>(),
                                      .runner = j.at("runner").get<std::string>(),
                                      .scheduling = j.at("scheduling").get<std::string>()});
  }
  // A failure is recorded with its case: drawn again here.
  return result_of(generate_engine_case(ref.case_seed, ref.size, state_->fixed), std::move(o));
}

std::string EngineLevel::count(const CaseRef& ref, const CaseResult& result,
                               CampaignReport& report) {
  const EngineCaseDetail& d = detail_of(result);
  const EngineOutcome& outcome = d.outcome;
  if (!outcome.valid) // a kernel mutant this build lacks, or a generator bug
    model::fail_input("engine case {} (seed {}): {}", ref.index, ref.case_seed,
                      outcome.invalid_reason);
  report.totals["steps"] += outcome.steps_run;
  report.totals["bytes_compared"] += outcome.bytes_compared;
  if (!outcome.refused_by_manager.empty()) ++report.totals["refused_by_manager"];
  ++report.cases_by["preset"][d.preset];
  ++report.cases_by["runner"][d.runner];
  ++report.cases_by["scheduling"][d.scheduling];
  report.coverage.merge(outcome.coverage);
  if (state_->options.steer_epoch > 0) {
    state_->tally.add(outcome.coverage);
    for (const auto& [name, n] : outcome.coverage.counts)
      if (n > 0) steer_first_reached.emplace(name, ref.index);
  }
  return fmt::format("{} steps, {}", report.total("steps"), d.preset);
}

void EngineLevel::record(const CaseRef&, const CaseResult& result, Finding& f, CampaignReport&) {
  const EngineCaseDetail& d = detail_of(result);
  MC_ASSERT(d.c.has_value());
  record_finding(state_->campaign, state_->options, *d.c, d.outcome, f);
}

// A device fault in a worker cost that worker only; in this process, its CUDA context.
bool EngineLevel::device_lost(const CaseResult& result) const {
  const EngineOutcome& outcome = detail_of(result).outcome;
  return outcome.failed() && outcome.failure->kind == "device-fault" && !state_->campaign.workers;
}

// Steering: the first case of a new epoch starts once every verdict of the epoch before is in,
// with the boosts those verdicts give.
StartGate EngineLevel::before_start(std::int64_t next, bool nothing_in_flight, CampaignReport&) {
  State& s = *state_;
  const std::int64_t epoch = s.options.steer_epoch;
  if (epoch == 0 || next / epoch == s.epoch_started) return {};
  if (!nothing_in_flight) {
    if (s.barrier_since < 0) s.barrier_since = s.elapsed();
    return {.wait = true};
  }
  if (s.barrier_since >= 0) {
    steer_stall_seconds += s.elapsed() - s.barrier_since;
    ++steer_barriers;
    s.barrier_since = -1.0;
  }
  s.epoch_started = next / epoch;
  const SteerBoosts boosts = steer_boosts(s.tally);
  if (boosts.any()) steer_epochs.push_back({.first_case = next, .boosts = boosts});
  if (boosts == s.fixed.steer) return {};
  s.fixed.steer = boosts;
  return {.new_setup = true};
}

void EngineLevel::report_json(const CampaignReport& r, nlohmann::json& j) const {
  write_counts(r, {"steps", "bytes_compared"}, {"preset", "runner", "scheduling"}, j);
  const EngineLevelOptions& o = state_->options;
  j.update(to_json(o.fixed));
  if (o.steer_epoch == 0) return;
  nlohmann::json epochs = nlohmann::json::array();
  for (const SteerEpoch& e : steer_epochs)
    epochs.push_back({{"first_case", e.first_case}, {"boosts", to_string(e.boosts)}});
  nlohmann::json first = nlohmann::json::object();
  for (const model::CoverageFeature& f : model::coverage_catalogue()) {
    if (!f.engine) continue;
    const auto it = steer_first_reached.find(std::string(f.name));
    first[std::string(f.name)] =
        it == steer_first_reached.end() ? nlohmann::json() : nlohmann::json(it->second);
  }
  j["steer"] = {{"epoch", o.steer_epoch},
                {"boosted_epochs", std::move(epochs)},
                {"first_reached", std::move(first)}};
}

CampaignReport run_engine_fuzz(const CampaignOptions& campaign, const EngineLevelOptions& options) {
  EngineLevel level(campaign, options);
  return run_campaign(campaign, level);
}

CaseWorkerJob engine_case_job(const nlohmann::json& setup, gpu::engine::ExecutorSource* external,
                              oracle::engine::KvManager* manager) {
  const CampaignOptions campaign = campaign_options_from_json(setup.at("campaign"));
  const auto [seed, max_size, repeat] =
      std::tuple(campaign.seed, campaign.max_size, campaign.repeat);
  MC_ASSERT(max_size >= 0 && max_size <= kEngineSizeMax && repeat >= 1);
  const nlohmann::json& options = setup.at("options");
  const EngineCaseFixed fixed = fixed_from_json(options.at("fixed"));
  EngineRunOptions run = run_options_from_json(options.at("run"));
  run.external = external;
  run.manager = manager;
  return CaseWorkerJob{.run = [=](std::int64_t index) {
    const std::uint64_t case_seed = seed + static_cast<std::uint64_t>(index);
    const EngineCase c = generate_engine_case(case_seed, size_of(case_seed, max_size), fixed);
    EngineOutcome outcome = run_engine_case_reporting_steps(c, run);
    for (int again = 1; again < repeat && outcome.valid && !outcome.failed(); ++again)
      outcome = run_engine_case_reporting_steps(c, run);
    // What the case was, so the campaign need not generate it again to count it.
    nlohmann::ordered_json payload = to_json(outcome);
    payload["preset"] = c.preset;
    payload["runner"] = runner_key(c);
    payload["scheduling"] = scheduling_key(c);
    return payload.dump();
  }};
}

} // namespace mc::fuzz
