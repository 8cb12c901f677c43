// `mambacheck gate`: what a kernel change must pass before merge, as a list of stages, one
// line each (name, cases, seconds, pass/fail) and one JUnit test case each:
//   kernel-fuzz    the kernel-level campaign on fixed seeds (every launch kind and size class)
//   engine-fuzz    the engine-level fuzz on fixed seeds (fuzz/engine/engine_fuzz.h)
//   (both fuzz stages also fail when they never reached a feature of their level's coverage,
//   model/coverage.h: a gate whose campaigns missed a case of the design proves nothing of it)
//   library        the scenario library replayed clean (harness/library.h)
//   mutant-smoke   a handful of mutants spanning launch kinds and the runner must each be
//                  killed, so the gate is shown to be live
// With --external COMMAND the kernels under test are a worker's (backends/external_backend.h,
// external_engine.h): the three first stages run on them, and in place of the mutant smoke
//   liveness       the kernel module's deliberately broken variants (COMMAND --variant NAME,
//                  or --variant-command's) must each be caught by one of those three stages
//                  (a finding, not a coverage gap), so the gate is shown live on that module;
//                  a module without select_variant (vLLM's) has none, and the adapter's own
//                  test kernels' variants run instead, on the device the module ran on
// Exit 0 when every stage passed, 1 otherwise. Counterexamples go under --out.
#include "backends/backend.h"
#include "backends/block_manager_worker.h"
#include "backends/external_backend.h"
#include "backends/external_engine.h"
#include "backends/mutant_backend.h"
#include "cli/commands.h"
#include "cli/external_option.h"
#include "cli/duration.h"
#include "cli/junit.h"
#include "cli/mutants_levels.h"
#include "cli/output_paths.h"
#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/engine/engine_fuzz.h"
#include "fuzz/engine/steer.h"
#include "fuzz/gen_steer.h"
#include "fuzz/mutants/mutants.h"
#include "harness/library.h"
#include "model/coverage.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

namespace mc::cli {
namespace {

// Fixed seeds: a gate run is the same run every time.
constexpr std::uint64_t kKernelSeeds[] = {1, 100001, 200001};
constexpr std::uint64_t kEngineSeeds[] = {1, 50001};
// Mutants whose kill proves the gate live: the decision of each fused kind, the data mover,
// the copy geometry, the V1 batched copy, and two runner bookkeeping bugs.
constexpr const char* kSmokeMutants[] = {
    "precopy_guard_by_address", "decide_reads_reset_accepted",  "preprocess_curr_floor",
    "overlap_copied_backwards", "temporal_ignores_bias_column", "batch_copy_drops_last",
    "skip_cleanup_of_resumed",  "v2_seed_with_attn_block_size"};
// The broken variants --external's liveness stage runs by default, named as the adapter's test
// kernels name them: one bug of each kind of copy and table lookup, then the forward's state
// kernels' (found by the engine stage, where the worker has them).
constexpr const char* kLivenessVariants[] = {
    "guard_by_address",       "temporal_size_from_stride",   "conv_shift_not_memmove",
    "ds_ignores_bias",        "table_by_batch_row",          "null_block_not_skipped",
    "drafts_into_one_column", "accepted_bound_wrong_stride", "no_accepted_bound"};

// The adapter's test kernels by the device they run on. A module under test without
// select_variant (vLLM's, a user's) has no broken variants of its own: its gate is shown live
// on these instead, on the device the module ran on, through the same stages.
struct TestKernels {
  std::string_view device;
  std::string_view module;
};
constexpr TestKernels kAdapterTestKernels[] = {{"host", "mambacheck_adapter.reference"},
                                               {"cuda", "mambacheck_adapter.triton_kernels"}};

// The reference block manager's broken variants (mambacheck_adapter/reference_manager.py), the
// liveness stage of a gate with --block-manager: each a block-manager bug of vLLM's in 2026.
constexpr const char* kBlockManagerVariants[] = {
    "optimistic_frees",         "null_gap_retirement",   "hit_short_at_boundary",
    "published_before_written", "eagle_split_unaligned", "lookahead_padding"};
// Engine cases a block-manager variant may take to be caught (at seed 1 the first four within
// 30, lookahead_padding at case 42, eagle_split_unaligned at case 156: both need an EAGLE case,
// the last one whose budget cuts a prefill chunk past the backed-off boundary).
constexpr std::int64_t kBlockManagerLivenessCases = 400;

struct GateOptions {
  std::string backend;
  std::string out = "mc-out/gate";
  std::string junit;
  std::string library;             // default: the installed library, else the source tree's
  std::int64_t kernel_cases = 250; // per seed
  std::vector<std::string> kinds;  // kernel fuzz: only these launch kinds (empty: all)
  std::int64_t engine_cases = 30;  // per seed
  std::string mutant_budget = "20s";
  // Features the campaign stages must reach (cli/coverage_option.h). Empty: all of them (with
  // --kinds, at the kernel level, the launches of those kinds).
  std::vector<std::string> require_coverage;
  std::string external; // a worker command: the kernels under test
  double external_timeout = backends::kExternalTimeoutSecondsDefault;
  std::vector<std::string> variants{std::begin(kLivenessVariants), std::end(kLivenessVariants)};
  std::string variant_command; // runs the variants (+ --variant NAME); default: `external`
  bool variants_given = false;
  std::string block_manager; // the engine stage plans through this manager under test
  double block_manager_timeout = backends::kBlockManagerTimeoutSecondsDefault;
};

// Where the stages run: a backend of this program, or the kernels of a worker command.
struct Target {
  backends::Backend backend = backends::Backend::host;
  std::string external; // worker command; empty: `backend`
  double external_timeout = backends::kExternalTimeoutSecondsDefault;
  // The engine level's worker for `external` (started once for the stages).
  backends::ExternalEngineSource* engine = nullptr;
  // The block manager under test (--block-manager), its command and its worker.
  std::string block_manager;
  oracle::engine::KvManager* manager = nullptr;
  std::filesystem::path out;
  bool verdict_only = false; // no reruns, no shrinking: the liveness stage needs the verdict
  std::string name() const {
    return external.empty() ? std::string(to_string(backend)) : "external";
  }
};

struct StageResult {
  bool passed = true;
  bool found = false; // it failed on a finding (not a coverage gap or a worker that failed)
  std::int64_t cases = 0;
  std::string detail; // one line: what held, or the first failure and how to reproduce it
};

struct Stage {
  std::string name;
  std::function<StageResult()> run;
};

using Clock = std::chrono::steady_clock;

// A campaign stage that held but never reached a required feature fails, naming them.
void require_coverage(StageResult& s, const model::CoverageRequirement& required,
                      const model::Coverage& coverage) {
  const std::vector<std::string> missing = model::missing_coverage(required, coverage);
  s.detail += fmt::format("; coverage {} of {} features", coverage.reached(), coverage.features());
  if (missing.empty() || !s.passed) return;
  s.passed = false;
  s.detail += fmt::format("; NEVER REACHED: {}", fmt::join(missing, ", "));
}

// The features a stage on kernels that cover only `covered` can reach: all but the launches of
// the other kinds, and what only the per-slot table kinds make (a slot's table row; a deferred
// postprocess is drawn only with them).
std::vector<std::string> reachable_features(model::CoverageLevel level,
                                            const std::vector<model::LaunchKind>& covered) {
  const auto has = [&](model::LaunchKind k) {
    return std::ranges::find(covered, k) != covered.end();
  };
  const bool slot_tables = has(model::LaunchKind::precopy_slot_tables) ||
                           has(model::LaunchKind::postprocess_align_slot_tables);
  using F = model::CoverageFeatureId;
  std::vector<std::string> out;
  for (const model::CoverageFeature& f : model::coverage_catalogue()) {
    if (!f.counted_at(level)) continue;
    if (!slot_tables && (f.id == F::slot_table_row || f.id == F::deferred_postprocess_reordered))
      continue;
    bool other_kind = false;
    for (const model::LaunchKind k : model::kAllLaunchKinds)
      other_kind = other_kind || (f.id == model::coverage_feature(k).id && !has(k));
    if (!other_kind) out.emplace_back(f.name);
  }
  return out;
}

// What the gate requires of a stage at `level`.
model::CoverageRequirement
stage_requirement(const GateOptions& o, model::CoverageLevel level,
                  const std::vector<model::LaunchKind>* covered = nullptr) {
  if (!o.require_coverage.empty()) {
    model::CoverageRequirement r = model::parse_coverage_requirement(o.require_coverage);
    // A named feature binds the stages whose level counts it.
    std::erase_if(r.features, [level](const std::string& name) {
      return !model::find_coverage_feature(name)->counted_at(level);
    });
    return r;
  }
  if ((level == model::CoverageLevel::engine || o.kinds.empty()) && covered == nullptr)
    return {.all = true};
  model::CoverageRequirement r;
  if (level == model::CoverageLevel::engine || o.kinds.empty()) {
    r.features = reachable_features(level, *covered);
    return r;
  }
  for (const std::string& name : o.kinds) {
    const model::LaunchKind kind = model::parse_launch_kind(name);
    if (covered == nullptr || std::ranges::find(*covered, kind) != covered->end())
      r.features.emplace_back(model::coverage_feature(kind).name);
  }
  return r;
}

// Campaigns of a fuzz stage: its fixed seeds, then, while a required feature is still missing,
// top-up batches on the seeds that follow the last fixed seed's cases, up to kTopUpFactor times
// the fixed cases. Each batch is drawn toward what is missing, not more of the same draw (a
// short campaign's sizes stay small: the default draw makes a big offset only from size 50 on):
// a kernel round runs the draw that reaches each missing feature (gen_steer.h, e.g. the
// big-offsets preset), an engine batch boosts the steer knobs of every missing feature
// (fuzz/engine/steer.h). Deterministic like the rest: coverage comes from what ran, so the same
// gate draws the same batches.
constexpr std::int64_t kTopUpFactor = 10;
// A kernel top-up round: a short run toward each missing feature, its draw making the feature
// likely on every case, kKernelTopUpCases cases shared among them (at least kKernelTopUpCasesMin
// each); what one round misses the next round draws toward again.
constexpr std::int64_t kKernelTopUpCases = 10;
constexpr std::int64_t kKernelTopUpCasesMin = 2;
struct CampaignRun {
  std::uint64_t seed = 0;
  std::int64_t cases = 0;
  const fuzz::GenSteerRow* toward = nullptr; // a kernel top-up's draw; null: a fixed seed's
  fuzz::SteerBoosts boosts;                  // an engine top-up's; none: a fixed seed's
};
// A fuzz stage's first finding, if its campaign of seed `seed` made one, as the stage's failure.
template <class Counterexample>
bool failed_on_finding(StageResult& s, const fuzz::CampaignReport& r, std::uint64_t seed) {
  const fuzz::Finding* f = r.first_failing();
  if (f == nullptr) return false;
  const auto* cx = f->counterexample_as<Counterexample>();
  s.passed = false;
  s.found = true;
  s.detail = fmt::format("seed {}: {} [{}, {}] (reproduce: {}; picture: {})", seed, cx->failure,
                         f->signature.to_string(), f->runs.summary(), f->reproduce,
                         cx->picture.string());
  return true;
}

// The liveness stage needs the verdict alone: no reruns, no shrinking.
void verdict_only(fuzz::CampaignOptions& c) {
  c.reruns = 0;
  c.shrink.candidates_max = 0;
}

template <std::size_t N>
std::vector<CampaignRun> fixed_runs(const std::uint64_t (&seeds)[N], std::int64_t cases) {
  std::vector<CampaignRun> runs;
  for (const std::uint64_t seed : seeds)
    runs.push_back({.seed = seed, .cases = cases});
  return runs;
}

// The next kernel top-up round: a run toward each missing feature that has a draw, on the seeds
// after `next_seed`, within `cases_left`.
std::vector<CampaignRun> kernel_top_up_round(const std::vector<std::string>& missing,
                                             std::uint64_t next_seed, std::int64_t cases_left) {
  std::vector<const fuzz::GenSteerRow*> rows;
  for (const std::string& feature : missing)
    if (const fuzz::GenSteerRow* row =
            fuzz::gen_steer_row(model::find_coverage_feature(feature)->id))
      rows.push_back(row);
  std::vector<CampaignRun> round;
  if (rows.empty()) return round;
  const std::int64_t each = std::max(kKernelTopUpCasesMin, kKernelTopUpCases / std::ssize(rows));
  for (const fuzz::GenSteerRow* row : rows) {
    const std::int64_t cases = std::min(each, cases_left);
    if (cases <= 0) break;
    round.push_back({.seed = next_seed, .cases = cases, .toward = row});
    next_seed += static_cast<std::uint64_t>(cases);
    cases_left -= cases;
  }
  return round;
}

// The knobs of every missing engine feature, boosted as missing.
fuzz::SteerBoosts engine_boosts(const std::vector<std::string>& missing) {
  fuzz::SteerBoosts boosts;
  for (const std::string& feature : missing)
    for (const std::optional<fuzz::SteerKnob>& knob :
         fuzz::steer_knobs(model::find_coverage_feature(feature)->id))
      if (knob) boosts.knobs[static_cast<std::size_t>(*knob)] = fuzz::SteerBoost::missing;
  return boosts;
}

// " (and N cases for coverage, seeds S to T: toward F (draw); ...)" for the top-up runs of a
// kernel stage; an engine stage's are steered toward whatever was missing before each batch.
std::string top_up_summary(const std::vector<CampaignRun>& runs, std::size_t fixed) {
  if (runs.size() == fixed) return "";
  std::int64_t cases = 0;
  std::vector<std::string> draws;
  for (std::size_t i = fixed; i < runs.size(); ++i) {
    cases += runs[i].cases;
    std::string draw =
        runs[i].toward != nullptr
            ? fmt::format("toward {} ({})", runs[i].toward->feature, runs[i].toward->draw)
            : "steered toward the features still missing before each batch";
    if (std::ranges::find(draws, draw) == draws.end()) draws.push_back(std::move(draw));
  }
  return fmt::format(" (and {} cases for coverage, seeds {} to {}: {})", cases, runs[fixed].seed,
                     runs.back().seed + static_cast<std::uint64_t>(runs.back().cases) - 1,
                     fmt::join(draws, "; "));
}

// A kernel campaign of the gate: its options, and its level's in `k`.
fuzz::CampaignOptions kernel_campaign(const GateOptions& o, const Target& t,
                                      backends::ExternalWorker* worker, const CampaignRun& run,
                                      fuzz::KernelLevelOptions& k) {
  fuzz::CampaignOptions c;
  c.seed = run.seed;
  c.cases_max = run.cases;
  for (const std::string& kind : o.kinds)
    k.gen.kinds.push_back(model::parse_launch_kind(kind));
  c.max_size = 100;
  if (worker) {
    backends::point_campaign_at(k.gen.kinds, k.backend, *worker);
    c.backend_name = "external";
    c.backend_args = fmt::format("--external {}", backends::shell_quote(t.external));
  } else {
    c.isolate = t.backend == backends::Backend::host; // an out-of-bounds kernel is a finding
    c.backend_name = std::string(to_string(t.backend));
    c.backend_args = fmt::format("--backend {}", c.backend_name);
    k.backend = backends::launch_runner(t.backend);
  }
  // After the worker's kinds are known: a draw narrows the kinds to those that make its feature.
  if (run.toward != nullptr) k.gen = run.toward->toward(k.gen);
  if (t.verdict_only) verdict_only(c);
  c.out_dir = t.out / "kernel";
  return c;
}

StageResult kernel_fuzz_stage(const GateOptions& o, const Target& t) {
  StageResult s;
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::kernel);
  std::unique_ptr<backends::ExternalWorker> worker;
  if (!t.external.empty())
    worker = backends::start_worker_in(t.external, t.out / "kernel-worker", t.external_timeout);
  const model::CoverageRequirement required =
      stage_requirement(o, model::CoverageLevel::kernel, worker ? &worker->kinds() : nullptr);
  std::vector<CampaignRun> runs = fixed_runs(kKernelSeeds, o.kernel_cases);
  const std::int64_t fixed_cases = o.kernel_cases * std::ssize(kKernelSeeds);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fuzz::KernelLevelOptions k;
    const fuzz::CampaignOptions c = kernel_campaign(o, t, worker.get(), runs[i], k);
    const fuzz::CampaignReport r = fuzz::run_kernel_campaign(c, k);
    s.cases += r.cases;
    coverage.merge(r.coverage);
    if (failed_on_finding<fuzz::KernelCounterexample>(s, r, runs[i].seed)) return s;
    const std::int64_t left = kTopUpFactor * fixed_cases - (s.cases - fixed_cases);
    if (i + 1 < runs.size() || left <= 0 || model::interrupted()) continue;
    for (const CampaignRun& run :
         kernel_top_up_round(model::missing_coverage(required, coverage),
                             runs[i].seed + static_cast<std::uint64_t>(runs[i].cases), left))
      runs.push_back(run);
  }
  s.detail = fmt::format("seeds {}, {}, {}: every case held{}", kKernelSeeds[0], kKernelSeeds[1],
                         kKernelSeeds[2], top_up_summary(runs, std::size(kKernelSeeds)));
  require_coverage(s, required, coverage);
  return s;
}

StageResult engine_fuzz_stage(const GateOptions& o, const Target& t) {
  StageResult s;
  std::int64_t steps = 0;
  model::Coverage coverage = model::Coverage::empty(model::CoverageLevel::engine);
  const model::CoverageRequirement required = stage_requirement(
      o, model::CoverageLevel::engine, t.engine != nullptr ? &t.engine->kinds() : nullptr);
  std::vector<CampaignRun> runs = fixed_runs(kEngineSeeds, o.engine_cases);
  const std::int64_t fixed_cases = o.engine_cases * std::ssize(kEngineSeeds);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fuzz::CampaignOptions c{.seed = runs[i].seed,
                            .cases_max = runs[i].cases,
                            .backend_name = t.name(),
                            .out_dir = t.out / "engine",
                            .shrink = fuzz::kEngineShrinkLimits};
    fuzz::EngineLevelOptions e{.run = {.executor = t.backend}};
    if (t.engine != nullptr) {
      e.run.external = t.engine;
      c.backend_args = fmt::format("--external {}", backends::shell_quote(t.external));
      e.fixed.kinds = t.engine->kinds();
    }
    e.fixed.steer = runs[i].boosts;
    if (t.manager != nullptr) {
      e.run.manager = t.manager;
      e.run.block_manager = t.block_manager;
    }
    // On the host every run in a forked child, as the kernel stage does: a kernel that faults is
    // a finding of this stage, not the end of the gate.
    c.isolate = t.engine == nullptr && t.manager == nullptr && t.backend == backends::Backend::host;
    if (t.verdict_only) verdict_only(c);
    const fuzz::CampaignReport r = fuzz::run_engine_fuzz(c, e);
    s.cases += r.cases;
    steps += r.total("steps");
    coverage.merge(r.coverage);
    if (failed_on_finding<fuzz::EngineCounterexample>(s, r, runs[i].seed)) return s;
    const std::int64_t left = kTopUpFactor * fixed_cases - (s.cases - fixed_cases);
    if (i + 1 < runs.size() || left <= 0 || model::interrupted()) continue;
    const std::vector<std::string> missing = model::missing_coverage(required, coverage);
    if (!missing.empty())
      runs.push_back({.seed = runs[i].seed + static_cast<std::uint64_t>(runs[i].cases),
                      .cases = std::min(std::max<std::int64_t>(o.engine_cases, 10), left),
                      .boosts = engine_boosts(missing)});
  }
  s.detail = fmt::format("seeds {}, {}: {} steps held{}", kEngineSeeds[0], kEngineSeeds[1], steps,
                         top_up_summary(runs, std::size(kEngineSeeds)));
  require_coverage(s, required, coverage);
  return s;
}

StageResult library_stage(const GateOptions& o, const Target& t) {
  const std::filesystem::path dir =
      o.library.empty() ? harness::default_library_dir() : std::filesystem::path(o.library);
  harness::ReplayOptions replay;
  replay.executor = t.backend;
  replay.external = t.engine;
  StageResult s;
  std::vector<std::string> skipped;
  for (const harness::LibraryResult& r : harness::run_library(dir, replay)) {
    if (!r.skipped.empty()) {
      skipped.push_back(r.info.name);
      continue;
    }
    ++s.cases;
    if (!r.clean.held()) { // the gate replays the scenarios clean; ctest also runs their mutants
      s.passed = false;
      s.found = true;
      s.detail = fmt::format("{}: {}", r.info.name, r.clean.summary());
      return s;
    }
  }
  s.detail = fmt::format("{} scenarios of {} held", s.cases, dir.string());
  if (!skipped.empty())
    s.detail += fmt::format(" ({} skipped: they launch kinds the kernels do not cover: {})",
                            skipped.size(), fmt::join(skipped, ", "));
  return s;
}

// The module a worker command loads: the last `--kernels NAME` (or `--kernels=NAME`) word, as
// the adapter's argparse takes it; empty when there is none. Only to name it in a line.
std::string kernels_named_in(const std::string& command) {
  std::istringstream words(command);
  std::string word, previous, named;
  while (words >> word) {
    if (previous == "--kernels") named = word;
    if (word.starts_with("--kernels=")) named = word.substr(std::strlen("--kernels="));
    previous = word;
  }
  return named;
}

// Where the broken variants run: the command that starts one (`--variant NAME` appended).
struct VariantSource {
  std::string command;
  std::string test_kernels; // "MODULE, DEVICE" when they run on the adapter's test kernels
  std::string unavailable;  // why no variant can run (then `command` is empty)
};

// --variant-command's, else the module under test's own when it has them (or its worker does
// not say), else the adapter's test kernels on the device it greeted with: the same command
// with `--kernels` and `--device` appended (the adapter's worker takes the last of each).
VariantSource variant_source(const GateOptions& o, const backends::ExternalWorker& under_test) {
  if (!o.variant_command.empty()) return {.command = o.variant_command};
  if (under_test.has_variants().value_or(true)) return {.command = o.external};
  const std::string named = kernels_named_in(o.external);
  const std::string module = named.empty() ? "the kernels module of --external" : named;
  const auto* test =
      std::ranges::find(kAdapterTestKernels, under_test.device(), &TestKernels::device);
  if (test == std::end(kAdapterTestKernels))
    return {.unavailable = fmt::format("{} has no select_variant and the adapter has no test "
                                       "kernels for its device '{}': name a worker of broken "
                                       "variants with --variant-command",
                                       module, under_test.device())};
  const std::string where = fmt::format("{}, {}", test->module, test->device);
  std::cout << fmt::format("liveness: {} has no select_variant; the broken variants run on the "
                           "adapter's test kernels ({})\n",
                           module, where)
            << std::flush;
  return {.command =
              fmt::format("{} --kernels {} --device {}", o.external, test->module, test->device),
          .test_kernels = where};
}

// The first of kernel-fuzz, engine-fuzz and library (in that order) that finds a variant's
// bug, or empty when none does. ExternalWorkerFailure when its worker cannot run.
std::string stage_that_catches(const GateOptions& o, Target t, std::int64_t& cases) {
  std::filesystem::create_directories(t.out);
  backends::ExternalEngineSource engine({.command = t.external,
                                         .work_dir = {},
                                         .log_file = t.out / "engine-worker.log",
                                         .timeout_seconds = t.external_timeout});
  t.engine = &engine;
  const std::pair<const char*, StageResult (*)(const GateOptions&, const Target&)> stages[] = {
      {"kernel-fuzz", kernel_fuzz_stage},
      {"engine-fuzz", engine_fuzz_stage},
      {"library", library_stage}};
  for (const auto& [name, run] : stages) {
    const StageResult r = run(o, t);
    cases += r.cases;
    if (r.found) return name;
  }
  return {};
}

// What became of the variants: caught (by a stage), missed (ran through every stage and held:
// the gate would let the bug through), could not run (no verdict: never counted as either),
// absent (a default name the module does not have).
struct LivenessTally {
  struct NotRun {
    std::string why; // the worker's failure, one line
    std::vector<std::string> variants;
  };
  std::vector<std::string> caught, missed, absent;
  std::vector<NotRun> could_not_run; // grouped by why: a start that fails fails for them all
  void not_run(const std::string& variant, const std::string& why) {
    auto same = std::ranges::find(could_not_run, why, &NotRun::why);
    if (same == could_not_run.end()) same = could_not_run.insert(same, {.why = why});
    same->variants.push_back(variant);
  }
};

std::string liveness_detail(const LivenessTally& v, std::size_t variants, bool passed) {
  const std::string not_in_module =
      v.absent.empty() ? "" : fmt::format(" (not in this module: {})", fmt::join(v.absent, ", "));
  if (passed)
    return fmt::format("{} of {} broken variants caught: {}{}", v.caught.size(),
                       variants - v.absent.size(), fmt::join(v.caught, ", "), not_in_module);
  if (v.missed.empty() && v.could_not_run.empty())
    return fmt::format("none of the default variants is in this module{}: name its broken "
                       "variants with --variants",
                       not_in_module);
  std::vector<std::string> parts;
  if (!v.missed.empty())
    parts.push_back(fmt::format("PASSED THE GATE: {} (the gate would miss these bugs)",
                                fmt::join(v.missed, ", ")));
  for (const LivenessTally::NotRun& n : v.could_not_run)
    parts.push_back(fmt::format("COULD NOT RUN: {} ({}; the gate is not shown live on them)",
                                fmt::join(n.variants, ", "), n.why));
  return fmt::format("{}; caught: {}{}", fmt::join(parts, "; "),
                     v.caught.empty() ? "none" : fmt::format("{}", fmt::join(v.caught, ", ")),
                     not_in_module);
}

// Each variant's worker through the stages on external kernels, in order, until one finds it.
StageResult liveness_stage(const GateOptions& o, const backends::ExternalWorker& under_test) {
  StageResult s;
  const VariantSource source = variant_source(o, under_test);
  if (!source.unavailable.empty()) {
    s.passed = false;
    s.detail = fmt::format("COULD NOT RUN: {}", source.unavailable);
    return s;
  }
  LivenessTally v;
  for (const std::string& variant : o.variants) {
    if (model::interrupted()) break;
    const Target t{
        .external = fmt::format("{} --variant {}", source.command, backends::shell_quote(variant)),
        .external_timeout = o.external_timeout,
        .out = std::filesystem::path(o.out) / "liveness" / variant,
        .verdict_only = true};
    try {
      const std::string by = stage_that_catches(o, t, s.cases);
      if (by.empty())
        v.missed.push_back(variant);
      else
        v.caught.push_back(fmt::format("{} by {}", variant, by));
    } catch (const backends::ExternalWorkerFailure& failure) {
      // The default list names the adapter's test kernels' variants; a module that lacks one
      // (the Triton test kernels have no per-slot-table kernels) says so at its start. Named
      // with --variants, every one must run.
      if (!o.variants_given && failure.message.find("unknown variant") != std::string::npos)
        v.absent.push_back(variant);
      else
        v.not_run(variant, failure.message);
    }
  }
  s.passed = v.missed.empty() && v.could_not_run.empty() && !v.caught.empty() &&
             v.caught.size() + v.absent.size() == o.variants.size();
  s.detail = liveness_detail(v, o.variants.size(), s.passed);
  if (!source.test_kernels.empty())
    s.detail = fmt::format("on the adapter's test kernels ({}): {}", source.test_kernels, s.detail);
  return s;
}

StageResult mutant_smoke_stage(const GateOptions& o, backends::Backend backend) {
  fuzz::MutantRunOptions run;
  run.seed = 1;
  run.seconds_max = parse_duration_option("--mutant-budget", o.mutant_budget);
  run.backend_name = std::string(to_string(backend));
  run.backend = backends::mutant_launch_runner(backend);
  run.out_dir = std::filesystem::path(o.out) / "mutants";
  std::vector<std::string> names(std::begin(kSmokeMutants), std::end(kSmokeMutants));
  StageResult s;
  std::vector<std::string> survivors;
  std::int64_t killed = 0;
  for (const fuzz::MutantJob& job : fuzz::select_jobs(mutant_jobs("both"), names)) {
    const fuzz::MutantOutcome m = job.run(run);
    s.cases += m.cases;
    if (m.killed)
      ++killed;
    else
      survivors.push_back(m.name);
  }
  s.passed = survivors.empty();
  s.detail = s.passed ? fmt::format("{} of {} mutants killed", killed, names.size())
                      : fmt::format("SURVIVED: {} (the gate would miss these bugs)",
                                    fmt::join(survivors, ", "));
  return s;
}

// The block manager's liveness: each broken variant of the reference manager must fail an
// engine campaign. The variants run on the command under test when it is the adapter's reference
// manager, else on the reference manager of the same Python (a manager under test such as
// vLLM's has no variants of its own): the gate is then shown live on the reference manager.
StageResult block_manager_liveness_stage(const GateOptions& o, const Target& t,
                                         const backends::BlockManagerWorker& under_test) {
  std::string base = o.block_manager;
  std::string on;
  if (under_test.greeting().find(" manager=reference") == std::string::npos) {
    const std::string python = o.block_manager.substr(0, o.block_manager.find(' '));
    base = python + " -m mambacheck_adapter.block_manager --manager reference";
    on = fmt::format("on the adapter's reference manager ({}): ", base);
  }
  StageResult s;
  LivenessTally v;
  for (const char* variant : kBlockManagerVariants) {
    const std::string command = fmt::format("{} --variant {}", base, variant);
    try {
      backends::BlockManagerWorker manager(backends::BlockManagerOptions{
          .command = command, .timeout_seconds = o.block_manager_timeout});
      fuzz::CampaignOptions c{.seed = kEngineSeeds[0],
                              .cases_max = kBlockManagerLivenessCases,
                              .backend_name = t.name(),
                              .out_dir = t.out / "block-manager-liveness" / variant};
      verdict_only(c);
      fuzz::EngineLevelOptions e{.run = {.executor = t.backend}};
      e.run.manager = &manager;
      e.run.block_manager = command;
      const fuzz::CampaignReport r = fuzz::run_engine_fuzz(c, e);
      s.cases += r.cases;
      (r.first_failing() != nullptr ? v.caught : v.missed).emplace_back(variant);
    } catch (const model::EnvironmentError& e) {
      v.not_run(variant, e.what());
    }
  }
  s.passed = v.missed.empty() && v.could_not_run.empty();
  s.detail = on + liveness_detail(v, std::size(kBlockManagerVariants), s.passed);
  return s;
}

// The options, refused before any stage runs; the backend they name.
backends::Backend checked_backend(const GateOptions& o) {
  if (!o.external.empty() && !o.backend.empty())
    model::fail_input("--external and --backend: give one of them");
  if (!o.external.empty()) check_timeout_option("--external-timeout", o.external_timeout);
  if (!o.block_manager.empty())
    check_timeout_option("--block-manager-timeout", o.block_manager_timeout);
  if (o.external.empty() && (!o.variant_command.empty() || o.variants_given))
    model::fail_input("--variants and --variant-command: with --external only");
  const backends::Backend backend = !o.external.empty() ? backends::Backend::host
                                    : o.backend.empty() ? backends::default_backend()
                                                        : backends::parse_backend(o.backend);
  if (backend == backends::Backend::oracle)
    model::fail_input("--backend: the gate runs on host or cuda");
  for (const std::string& kind : o.kinds)
    model::parse_launch_kind(kind); // an unknown kind is exit 2 before any stage runs
  if (o.kernel_cases < 1 || o.engine_cases < 1)
    model::fail_input("--kernel-cases and --engine-cases: at least 1");
  check_output_file("--junit", o.junit);
  create_output_dir("--out", o.out);
  parse_duration_option("--mutant-budget", o.mutant_budget); // reject a bad one before running
  model::parse_coverage_requirement(o.require_coverage);     // and an unknown feature
  backends::require_backend(backend);
  if (o.library.empty()) harness::default_library_dir(); // none installed or in the source: exit 3
  return backend;
}

// One stage, run, printed and written as its JUnit case.
JunitCase run_stage(const Stage& stage) {
  const Clock::time_point start = Clock::now();
  StageResult r;
  try {
    r = stage.run();
  } catch (const model::EnvironmentError& e) { // e.g. no cuda engine executor in this build
    r.passed = false;
    r.detail = fmt::format("could not run: {}", e.what());
  } catch (const backends::ExternalWorkerFailure& failure) { // the worker gave up mid-stage
    r.passed = false;
    r.detail = fmt::format("could not run: {}", failure.message);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const bool cut_short = r.passed && model::interrupted();
  std::cout << fmt::format("  {:<13} {:>6} cases {:>7.1f} s  {}  {}\n", stage.name, r.cases,
                           seconds,
                           cut_short  ? "interrupted"
                           : r.passed ? "pass"
                                      : "FAIL",
                           r.detail)
            << std::flush;
  return JunitCase{.name = stage.name,
                   .seconds = seconds,
                   .failed = !r.passed,
                   .skipped = cut_short,
                   .message = cut_short  ? fmt::format("interrupted after {} cases", r.cases)
                              : r.passed ? ""
                                         : r.detail,
                   .details = r.detail};
}

// The processes the stages run on, started once for them all; one that cannot start is exit 3
// before any stage.
struct GateWorkers {
  std::unique_ptr<backends::ExternalEngineSource> engine;  // --external
  std::unique_ptr<backends::BlockManagerWorker> manager;   // --block-manager
};

GateWorkers start_gate_workers(const GateOptions& o, Target& target) {
  GateWorkers w;
  if (!o.external.empty()) {
    w.engine = backends::start_external_engine(
        o.external, o.external_timeout,
        std::filesystem::absolute(std::filesystem::path(o.out) / "engine-worker.log"));
    target.engine = w.engine.get();
  }
  w.manager = start_block_manager(o.block_manager, o.block_manager_timeout);
  if (w.manager) {
    target.block_manager = o.block_manager;
    target.manager = w.manager.get();
  }
  return w;
}

int run_gate(const GateOptions& o) {
  const backends::Backend backend = checked_backend(o);
  Target target{.backend = backend,
                .external = o.external,
                .external_timeout = o.external_timeout,
                .out = o.out};
  const GateWorkers workers = start_gate_workers(o, target);
  std::vector<Stage> stages;
  stages.push_back({"kernel-fuzz", [&] { return kernel_fuzz_stage(o, target); }});
  stages.push_back({"engine-fuzz", [&] { return engine_fuzz_stage(o, target); }});
  stages.push_back({"library", [&] { return library_stage(o, target); }});
  if (o.external.empty())
    stages.push_back({"mutant-smoke", [&] { return mutant_smoke_stage(o, backend); }});
  else
    stages.push_back({"liveness", [&] { return liveness_stage(o, workers.engine->worker()); }});
  if (workers.manager)
    stages.push_back({"manager-live",
                      [&] { return block_manager_liveness_stage(o, target, *workers.manager); }});
  std::cout << fmt::format("gate on the {} backend: {} stages\n", target.name(), stages.size());
  std::vector<JunitCase> junit;
  bool passed = true;
  for (const Stage& stage : stages) {
    if (model::interrupted()) {
      junit.push_back(
          JunitCase{.name = stage.name,
                    .skipped = true,
                    .message = fmt::format("not run: interrupted by {}",
                                           model::signal_name(model::interrupt_signal()))});
      continue;
    }
    junit.push_back(run_stage(stage));
    passed = passed && !junit.back().failed;
  }
  if (!o.junit.empty()) write_junit(o.junit, "mambacheck.gate", junit);
  if (model::interrupted()) {
    // A stage cut short proves nothing either way: the gate neither passed nor failed.
    std::cout << fmt::format("gate interrupted by {}: {}\n",
                             model::signal_name(model::interrupt_signal()),
                             passed ? "no stage failed before it" : "a stage FAILED before it");
    return 128 + model::interrupt_signal();
  }
  std::cout << (passed ? "gate passed\n" : "gate FAILED\n");
  return passed ? kExitOk : kExitMismatch;
}

void add_gate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<GateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "gate", "The pre-merge check: fixed-seed fuzz at both levels, the scenario library, and "
              "a mutant smoke that proves the gate is live");
  cmd->add_option("--backend", o->backend, "host or cuda (default: cuda when a GPU is present)");
  cmd->add_option("--out", o->out, "Counterexamples go here (default mc-out/gate)");
  cmd->add_option("--junit", o->junit, "Write JUnit XML (one test case per stage)");
  cmd->add_option("--library", o->library,
                  "Scenario library directory (default: the one installed with this binary, "
                  "else its source tree's)");
  cmd->add_option("--kinds", o->kinds,
                  "Kernel fuzz: only these launch kinds (postprocess, postprocess_align, "
                  "precopy, preprocess_align, batch_copy, precopy_v1, "
                  "postprocess_align_slot_tables, precopy_slot_tables)")
      ->delimiter(',');
  cmd->add_option("--kernel-cases", o->kernel_cases,
                  "Kernel-level cases per fixed seed (default 250, 3 seeds)");
  cmd->add_option("--engine-cases", o->engine_cases,
                  "Engine-level cases per fixed seed (default 30, 2 seeds)");
  cmd->add_option("--mutant-budget", o->mutant_budget,
                  "Time each smoke mutant may take to be killed (default 20s)");
  cmd->add_option("--require-coverage", o->require_coverage,
                  "Features the fuzz stages must reach (comma list, all or none; default all: "
                  "every feature of each stage's level)")
      ->delimiter(',');
  cmd->add_option("--external", o->external,
                  "The kernels under test are this worker command's (the adapter's worker, as "
                  "`fuzz --external` takes it): every stage runs on them, and a liveness stage "
                  "replaces the mutant smoke (docs/adapter.md)");
  cmd->add_option("--external-timeout", o->external_timeout,
                  "--external: seconds a case or launch may take before the worker counts as "
                  "hung (default 300)");
  cmd->add_option("--variants", o->variants,
                  "--external's liveness stage: the broken variants that must each fail the "
                  "gate (comma list; default guard_by_address, temporal_size_from_stride, "
                  "conv_shift_not_memmove, ds_ignores_bias, table_by_batch_row, and the "
                  "forward's null_block_not_skipped, drafts_into_one_column, "
                  "accepted_bound_wrong_stride, no_accepted_bound)")
      ->delimiter(',')
      ->each([o](const std::string&) { o->variants_given = true; });
  cmd->add_option("--variant-command", o->variant_command,
                  "--external's liveness stage: the worker command that runs the variants, "
                  "with --variant NAME appended (default: --external's; for a module without "
                  "select_variant, the adapter's test kernels on the same device)");
  add_block_manager_options(*cmd, o->block_manager, o->block_manager_timeout);
  cmd->callback([o, &action] { action = [o] { return run_gate(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_gate_command);

} // namespace mc::cli
