#include "fuzz/campaign/kernel_campaign.h"

#include "fuzz/campaign/kernel_shrink.h"
#include "fuzz/campaign/kernel_signature.h"
#include "fuzz/isolate.h"
#include "fuzz/run_case.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/interrupt.h"
#include "model/output_file.h"
#include "model/request_arrays.h"
#include "oracle/launch.h"
#include "show/pictures.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The report files of a saved case: what failed, how reliably, and the case.
void write_reports(const LaunchSpec& spec, const KernelFinding& finding, const RunTally& runs,
                   const std::optional<Difference>& difference, const std::string& failure,
                   const KernelCampaignOptions& options, const std::filesystem::path& dir) {
  nlohmann::json report = {{"failure", failure},
                           {"backend", options.backend_name},
                           {"mutant", options.mutant_name},
                           {"signature", finding.signature.to_string()},
                           {"classification", to_string(finding.signature.classification)},
                           {"runs", runs.runs},
                           {"failed_runs", runs.failed},
                           {"case", describe(spec)}};
  if (difference) report["difference"] = to_json(*difference);
  model::write_whole_file(dir / "report.json", report.dump(2) + "\n");
  std::string text = fmt::format("{}\n\nsignature {}\n{} on the backend under test ({})\n", failure,
                                 finding.signature.to_string(), runs.summary(),
                                 to_string(finding.signature.classification));
  if (finding.signature.classification == Classification::nondeterministic) {
    text += "the runs of the first case:\n";
    for (std::size_t i = 0; i < finding.rows_in_runs.size(); ++i)
      text += fmt::format("  run {}: {}\n", i + 1, finding.rows_in_runs[i]);
  }
  text += fmt::format("\n{}\n", describe(spec));
  model::write_whole_file(dir / "report.txt", text);
}

// report.html beside report.txt: the backend runs the saved case once more for the actual
// bytes (in a forked child where the campaign isolates its runs); `can_run` false: the device
// is lost, only the oracle's side is drawn. Returns the file, or empty when it was not written.
std::filesystem::path write_picture(const LaunchSpec& spec, const KernelFinding& finding,
                                    const RunTally& runs, const std::string& failure,
                                    const KernelCampaignOptions& options, bool can_run,
                                    const std::filesystem::path& dir) {
  const model::LaunchCase launch = materialize(spec);
  const std::string backend_args = fmt::format(
      "--backend {}{}", options.backend_name,
      options.mutant_name.empty() ? "" : " --mutant " + options.mutant_name);
  show::Header header{
      .title = fmt::format("kernel counterexample: {}, {} rows", model::to_string(launch.kind),
                           launch.num_reqs),
      .source = dir.generic_string(),
      .failure = failure,
      .signature = finding.signature.to_string(),
      .rate = fmt::format("{} ({})", runs.summary(), to_string(runs.classify())),
      .reproduce = fmt::format("mambacheck case {} {} --check", dir.generic_string(), backend_args)};
  const std::string actual_name =
      fmt::format("{}{}", options.backend_name,
                  options.mutant_name.empty() ? "" : ", mutant " + options.mutant_name);
  const std::filesystem::path file = dir / "report.html";
  const std::string html = show::kernel_picture(launch, can_run ? options.backend : LaunchRunner{},
                                                options.isolate, actual_name, std::move(header));
  return show::write_picture(file, html) ? file : std::filesystem::path();
}

void save_spec(const LaunchSpec& spec, const std::filesystem::path& dir) {
  const model::LaunchCase launch = materialize(spec);
  model::save_case(launch, dir);
  // The expected result is the oracle's, so `mambacheck case DIR --check` replays the failure.
  try {
    model::save_result(oracle::run_launch(launch), dir);
  } catch (const model::InputError&) {
    // No oracle result for a case the oracle rejects; the report says why.
  }
}

// The first case of a new signature: rerun, classify, shrink, save.
class FindingRecorder {
public:
  FindingRecorder(const KernelCampaignOptions& options, const CaseJudge& judge)
      : options_(options), judge_(judge) {}

  // `can_rerun` false: the device context is lost and nothing replaced it; the original case
  // is saved as it is.
  KernelFinding record(std::uint64_t case_seed, int size, const rc::Shrinkable<LaunchSpec>& drawn,
                       const CaseVerdict& first, bool can_rerun) {
    KernelFinding f{.signature = first.signature,
                    .first_case_seed = case_seed,
                    .first_size = size,
                    .cases = 1,
                    .failure = *first.failure};
    f.skipped = skipped_by(f.signature, options_.skip_signatures);
    const std::string key = f.signature.key();
    tally(f, first, key);
    for (int i = 0; i < options_.reruns && can_rerun; ++i)
      tally(f, judge_(drawn.value()), key);
    f.signature.classification = f.runs.classify();
    if (f.signature.classification != Classification::nondeterministic) f.rows_in_runs.clear();
    if (f.skipped) return f;

    Counterexample cx{.case_seed = case_seed, .size = size};
    const std::string stem = fmt::format("kernel-seed{}", case_seed);
    cx.original_dir = options_.out_dir / (stem + "-original");
    save_spec(drawn.value(), cx.original_dir);
    write_reports(drawn.value(), f, f.runs, first.difference, f.failure, options_,
                  cx.original_dir);
    write_picture(drawn.value(), f, f.runs, f.failure, options_, can_rerun, cx.original_dir);

    ShrinkOutcome shrunk{.spec = drawn.value(), .saved_runs = f.runs};
    CaseVerdict last = first;
    if (can_rerun) {
      shrunk = shrink_finding(drawn, f.runs, key, judge_, std::max(options_.reruns, 1),
                              options_.shrink);
      last = judge_(shrunk.spec); // for the saved case's own difference
    }
    const bool last_counts = last.failure && last.signature.key() == key;
    cx.failure = last_counts ? *last.failure : f.failure;
    cx.difference = last_counts ? last.difference : first.difference;
    cx.description = describe(shrunk.spec);
    cx.requests = shrunk.spec.num_reqs;
    cx.copies = last_counts ? last.copies : first.copies;
    cx.shrink_steps = shrunk.kept ? shrunk.steps : 0;
    cx.shrink_tried = shrunk.tried;
    cx.saved_runs = shrunk.saved_runs;
    cx.shrink_kept = shrunk.kept;
    cx.shrink_timed_out = shrunk.timed_out;
    cx.shrunk_dir = options_.out_dir / stem;
    save_spec(shrunk.spec, cx.shrunk_dir);
    write_reports(shrunk.spec, f, cx.saved_runs, cx.difference, cx.failure, options_,
                  cx.shrunk_dir);
    cx.picture =
        write_picture(shrunk.spec, f, cx.saved_runs, cx.failure, options_, can_rerun, cx.shrunk_dir);
    f.counterexample = std::move(cx);
    return f;
  }

private:
  static void tally(KernelFinding& f, const CaseVerdict& v, const std::string& key) {
    add_run(f.runs, v.failure, v.signature.key(), key, v.backend_error);
    if (!v.failure) {
      f.rows_in_runs.emplace_back("held");
      return;
    }
    const std::string& fingerprint = f.runs.run_failures.back();
    std::string features;
    for (const std::string& feature : v.signature.features)
      features += (features.empty() ? "" : ", ") + feature;
    std::string line =
        v.row ? fmt::format("batch row {} ({}): {}", *v.row, features.empty() ? "-" : features,
                            fingerprint)
              : fingerprint;
    for (const std::string& pair : v.pairs)
      line += "\n      " + pair;
    f.rows_in_runs.push_back(std::move(line));
  }

  const KernelCampaignOptions& options_;
  const CaseJudge& judge_;
};

} // namespace

CaseVerdict judge_case(const LaunchSpec& spec, const LaunchRunner& backend) {
  const model::LaunchCase launch = materialize(spec);
  return verdict_of(launch, run_case(launch, backend));
}

CaseVerdict verdict_of(const model::LaunchCase& launch, const CaseOutcome& outcome) {
  CaseVerdict verdict;
  if (outcome.status == CaseStatus::oracle_rejected) {
    // The generator promises valid cases: a rejected one is a finding about mambacheck.
    verdict.failure = fmt::format("the oracle rejected a generated case: {}", outcome.error);
    verdict.rejected = true;
    verdict.signature = kernel_signature(launch, outcome);
    return verdict;
  }
  verdict.failure = outcome.failure();
  if (verdict.failure) verdict.signature = kernel_signature(launch, outcome);
  model::count_launch(verdict.coverage, {.layout = &launch.layout,
                                         .kind = launch.kind,
                                         .num_reqs = launch.num_reqs,
                                         .before = &launch.requests,
                                         .after = &outcome.oracle.requests,
                                         .tables = &launch.block_tables,
                                         .decisions = outcome.oracle.decisions});
  if (outcome.status == CaseStatus::backend_failed) {
    verdict.backend_error = true;
    verdict.device_lost = outcome.device_fault;
    return verdict;
  }
  verdict.difference = outcome.difference;
  if (outcome.difference) {
    verdict.row = failing_row(launch, outcome.oracle, *outcome.difference);
    verdict.pairs = differing_pairs(launch, outcome.oracle, outcome.backend);
  }
  verdict.copies = static_cast<std::int64_t>(outcome.oracle.decisions.size());
  for (const model::Arena& a : outcome.oracle.arenas)
    verdict.arena_bytes += a.size_bytes();
  return verdict;
}

namespace {

// Which kind of buffer a crash line says the faulting address lies in or next to.
std::string crash_shape(const std::string& message) {
  if (message.find("block table") != std::string::npos) return "block-table";
  if (message.find("arena") != std::string::npos) return "arena";
  if (message.find("in no buffer") != std::string::npos) return "no-buffer";
  for (const model::RequestArrayField& f : model::kRequestArrays)
    if (message.find(f.name) != std::string::npos) return "request-array";
  return "-";
}

} // namespace

CaseVerdict judge_case_isolated(const LaunchSpec& spec, const LaunchRunner& backend,
                                double timeout_seconds) {
  // Runs in the child as soon as it is forked: the references are still good there.
  return isolated_verdict(
      spec.kind,
      run_isolated([&spec, &backend] { return to_json(judge_case(spec, backend)).dump(); },
                   IsolateOptions{.timeout_seconds = timeout_seconds}));
}

CaseVerdict isolated_verdict(model::LaunchKind kind, const IsolatedOutcome& r) {
  if (r.returned()) return verdict_from_json(nlohmann::json::parse(r.payload));
  CaseVerdict v;
  v.failure = fmt::format("the backend crashed: {}", r.message);
  v.backend_error = true;
  v.signature = Signature{.level = "kernel",
                          .kind = std::string(model::to_string(kind)),
                          .difference = r.end == IsolatedEnd::timed_out ? "timeout" : "crash",
                          .shape = crash_shape(r.message),
                          .classification = Classification::backend_error};
  return v;
}

nlohmann::json to_json(const CaseVerdict& v) {
  nlohmann::json j{{"rejected", v.rejected},
                   {"backend_error", v.backend_error},
                   {"device_lost", v.device_lost},
                   {"signature", to_json(v.signature)},
                   {"copies", v.copies},
                   {"arena_bytes", v.arena_bytes},
                   {"coverage", model::to_json(v.coverage)}};
  if (v.failure) j["failure"] = *v.failure;
  if (v.difference) j["difference"] = to_json(*v.difference);
  if (v.row) j["row"] = *v.row;
  if (!v.pairs.empty()) j["pairs"] = v.pairs;
  return j;
}

CaseVerdict verdict_from_json(const nlohmann::json& j) {
  CaseVerdict v{.rejected = j.at("rejected").get<bool>(),
                .backend_error = j.at("backend_error").get<bool>(),
                .device_lost = j.at("device_lost").get<bool>(),
                .signature = signature_from_json(j.at("signature")),
                .copies = j.at("copies").get<std::int64_t>(),
                .arena_bytes = j.at("arena_bytes").get<std::int64_t>(),
                .coverage = model::coverage_from_json(j.at("coverage"))};
  if (j.contains("failure")) v.failure = j.at("failure").get<std::string>();
  if (j.contains("difference")) v.difference = difference_from_json(j.at("difference"));
  if (j.contains("row")) v.row = j.at("row").get<std::int32_t>();
  if (j.contains("pairs")) v.pairs = j.at("pairs").get<std::vector<std::string>>();
  return v;
}

namespace {

// Case `index` of a campaign: drawn from seed + index at a size cycling over 0..max_size.
std::uint64_t case_seed_of(std::uint64_t seed, std::int64_t index) {
  return seed + static_cast<std::uint64_t>(index);
}
int size_of(std::int64_t index, int max_size) {
  return static_cast<int>(index % (max_size + 1));
}

std::optional<SizeClass> parse_size_class(std::string_view name) {
  for (const SizeClass c : kAllSizeClasses)
    if (to_string(c) == name) return c;
  return std::nullopt;
}

} // namespace

CaseWorkerJob kernel_case_job(const nlohmann::json& setup, LaunchRunner backend) {
  MC_ASSERT(backend != nullptr);
  const auto seed = setup.at("seed").get<std::uint64_t>();
  const int max_size = setup.at("max_size").get<int>();
  const int repeat = setup.at("repeat").get<int>();
  MC_ASSERT(max_size >= 0 && max_size <= 100 && repeat >= 1);
  const rc::Gen<LaunchSpec> gen = gen_launch_spec(gen_options_from_json(setup.at("gen")));
  return CaseWorkerJob{.run = [=](std::int64_t index) {
    const LaunchSpec spec =
        gen(rc::Random(case_seed_of(seed, index)), size_of(index, max_size)).value();
    CaseVerdict verdict = judge_case(spec, backend);
    for (int run = 1; run < repeat && !verdict.failure; ++run)
      verdict = judge_case(spec, backend);
    // What the case was, so the campaign need not draw it again to count it.
    nlohmann::json payload = to_json(verdict);
    payload["kind"] = model::to_string(spec.kind);
    payload["size_class"] = to_string(spec.size_class);
    return payload.dump();
  }};
}

const KernelFinding* KernelCampaignReport::first_failing() const {
  return first_not_skipped(findings);
}

std::int64_t KernelCampaignReport::failing_cases() const { return cases_of(findings); }

namespace {

// A case of the campaign, started.
struct StartedCase {
  std::int64_t index = 0;
  std::uint64_t case_seed = 0;
  int size = 0;
};

// What the campaign counts of a case.
struct CaseResult {
  CaseVerdict verdict;
  model::LaunchKind kind = model::LaunchKind::postprocess;
  SizeClass size_class = SizeClass::tiny;
};

// The cases in flight, in case order: in case workers, `jobs` at a time; otherwise one at a
// time in this process.
class CasesInFlight {
public:
  CasesInFlight(const KernelCampaignOptions& options, const rc::Gen<LaunchSpec>& gen,
                const CaseJudge& judge)
      : options_(options), gen_(gen), judge_(judge) {
    if (!options.workers) return;
    CaseWorkerStart start = *options.workers;
    start.setup["level"] = "kernel";
    start.setup["seed"] = options.seed;
    start.setup["max_size"] = options.max_size;
    start.setup["repeat"] = options.repeat;
    start.setup["gen"] = to_json(options.gen);
    // A case runs all its repeats in its worker.
    start.options.timeout_seconds = options.case_timeout_seconds * options.repeat;
    pool_.emplace(std::move(start), options.jobs);
  }

  bool has_room() { return pool_ ? pool_->has_room() : started_.empty(); }
  bool empty() const { return started_.empty(); }
  bool oldest_ready() { return !pool_ || pool_->oldest_done(); }
  void wait() { pool_->wait(); }
  // Before the campaign reruns and shrinks a finding: the cases running now finish first, so
  // none waits unread (and past its timeout) meanwhile.
  void settle() {
    if (pool_) pool_->settle();
  }
  void clear() {
    if (pool_) pool_->clear();
    started_.clear();
    results_.clear();
  }

  void start(const StartedCase& c) {
    if (pool_) {
      pool_->start(c.index);
    } else {
      const LaunchSpec spec = gen_(rc::Random(c.case_seed), c.size).value();
      CaseVerdict verdict = judge_(spec);
      for (int run = 1; run < options_.repeat && !verdict.failure; ++run)
        verdict = judge_(spec);
      results_.push_back(CaseResult{
          .verdict = std::move(verdict), .kind = spec.kind, .size_class = spec.size_class});
    }
    started_.push_back(c);
  }

  // The oldest case and what it gave (waits for it).
  std::pair<StartedCase, CaseResult> take() {
    MC_ASSERT(!started_.empty());
    const StartedCase c = started_.front();
    started_.pop_front();
    if (pool_) return {c, from_worker(c, pool_->take_oldest())};
    CaseResult result = std::move(results_.front());
    results_.pop_front();
    return {c, std::move(result)};
  }

private:
  CaseResult from_worker(const StartedCase& c, const IsolatedOutcome& outcome) {
    if (outcome.returned()) {
      const nlohmann::json j = nlohmann::json::parse(outcome.payload);
      const std::optional<SizeClass> size_class =
          parse_size_class(j.at("size_class").get<std::string>());
      MC_ASSERT(size_class.has_value());
      return CaseResult{.verdict = verdict_from_json(j),
                        .kind = model::parse_launch_kind(j.at("kind").get<std::string>()),
                        .size_class = *size_class};
    }
    // The worker died or timed out on it: what the case was, drawn again here.
    const LaunchSpec spec = gen_(rc::Random(c.case_seed), c.size).value();
    return CaseResult{.verdict = isolated_verdict(spec.kind, outcome),
                      .kind = spec.kind,
                      .size_class = spec.size_class};
  }

  const KernelCampaignOptions& options_;
  const rc::Gen<LaunchSpec>& gen_;
  const CaseJudge& judge_;
  std::optional<CaseWorkerPool> pool_;
  std::deque<StartedCase> started_;
  std::deque<CaseResult> results_; // run in this process
};

} // namespace

KernelCampaignReport run_kernel_campaign(const KernelCampaignOptions& options) {
  MC_ASSERT(options.backend != nullptr);
  MC_ASSERT(options.max_size >= 0 && options.max_size <= 100);
  MC_ASSERT(options.reruns >= 0 && options.repeat >= 1);
  MC_ASSERT(options.jobs >= 1 && (options.jobs == 1 || options.workers));
  const Clock::time_point start = Clock::now();
  const rc::Gen<LaunchSpec> gen = gen_launch_spec(options.gen);
  KernelCampaignReport report;
  LaunchRunner backend = options.backend;
  bool device_lost = false; // and nothing replaced the backend
  MC_ASSERT(!options.isolate || !options.replace_backend); // isolation forks: no device here
  const CaseJudge judge = [&](const LaunchSpec& spec) {
    CaseVerdict v = options.isolate
                        ? judge_case_isolated(spec, backend, options.case_timeout_seconds)
                        : judge_case(spec, backend);
    if (v.device_lost && !device_lost) {
      if (options.replace_backend) {
        backend = options.replace_backend();
        if (report.backend_replaced.empty())
          report.backend_replaced = fmt::format(
              "the device faulted and the CUDA context of this process was lost: later runs "
              "went to a worker process, restarted after every fault ({})",
              *v.failure);
      } else {
        device_lost = true;
      }
    }
    return v;
  };
  FindingRecorder recorder(options, judge);
  CasesInFlight flight(options, gen, judge);
  const std::int64_t stride = options.shard.count;
  std::int64_t next = first_case_of(options.shard, options.first_case); // the next to start
  report.next_case = next;
  bool stop = false;
  const auto may_start = [&] {
    if (stop || next >= options.cases_max) return false;
    if (options.seconds_max > 0 && seconds_since(start) > options.seconds_max) return false;
    if (model::interrupted()) {
      report.interrupted = model::interrupt_signal();
      return false;
    }
    return true;
  };
  // One case's verdict, in case order; false: the campaign stops after it.
  const auto count = [&](const StartedCase& c, const CaseResult& result) {
    const CaseVerdict& verdict = result.verdict;
    ++report.cases;
    ++report.cases_by_kind[std::string(model::to_string(result.kind))];
    ++report.cases_by_size_class[std::string(to_string(result.size_class))];
    report.copies_compared += verdict.copies;
    report.arena_bytes_compared += verdict.arena_bytes;
    report.coverage.merge(verdict.coverage);
    if (options.on_case) options.on_case(report.cases, result.kind, result.size_class);
    if (!verdict.failure) return true;
    if (report.findings.empty()) report.seconds_to_failure = seconds_since(start);
    const std::string key = verdict.signature.key();
    auto known = std::find_if(report.findings.begin(), report.findings.end(),
                              [&key](const KernelFinding& f) { return f.signature.key() == key; });
    if (known != report.findings.end()) {
      ++known->cases;
    } else {
      flight.settle();
      const rc::Shrinkable<LaunchSpec> drawn = gen(rc::Random(c.case_seed), c.size);
      report.findings.push_back(recorder.record(c.case_seed, c.size, drawn, verdict, !device_lost));
      if (options.on_finding) options.on_finding(report.findings.back());
    }
    if (device_lost) {
      report.stopped = fmt::format(
          "the device faulted on case seed {} and the CUDA context of this process is lost; "
          "the cases after it did not run (continue with --resume-from {})",
          c.case_seed, c.index + stride);
      return false;
    }
    return options.keep_going || report.first_failing() == nullptr;
  };
  for (;;) {
    while (flight.has_room() && may_start()) {
      flight.start(StartedCase{.index = next,
                               .case_seed = case_seed_of(options.seed, next),
                               .size = size_of(next, options.max_size)});
      next += stride;
    }
    if (flight.empty()) break;
    if (!flight.oldest_ready()) {
      flight.wait();
      continue;
    }
    const auto [c, result] = flight.take();
    report.next_case = c.index + stride;
    if (!count(c, result)) {
      stop = true;
      flight.clear(); // cases after the last counted are not part of the campaign
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

nlohmann::json to_json(const KernelCampaignOptions& options, const KernelCampaignReport& report) {
  const KernelFinding* failing = report.first_failing();
  nlohmann::json j = {{"level", "kernel"},
                      {"backend", options.backend_name},
                      {"seed", options.seed},
                      {"max_size", options.max_size},
                      {"reruns", options.reruns},
                      {"cases_max", options.cases_max},
                      {"cases", report.cases},
                      {"cases_by_kind", report.cases_by_kind},
                      {"cases_by_size_class", report.cases_by_size_class},
                      {"copies_compared", report.copies_compared},
                      {"arena_bytes_compared", report.arena_bytes_compared},
                      {"failing_cases", report.failing_cases()},
                      {"coverage", model::to_json(report.coverage)},
                      {"result", failing != nullptr ? "mismatch" : "held"}};
  if (!report.stopped.empty()) j["stopped"] = report.stopped;
  if (!report.backend_replaced.empty()) j["backend_replaced"] = report.backend_replaced;
  if (options.first_case > 0) j["first_case"] = options.first_case;
  if (!options.shard.whole())
    j["shard"] = {{"index", options.shard.index}, {"count", options.shard.count}};
  if (options.keep_going) j["keep_going"] = true;
  if (!options.skip_signatures.empty()) j["skip_signatures"] = options.skip_signatures;
  if (report.interrupted != 0)
    j["interrupted"] = {{"signal", model::signal_name(report.interrupted)},
                        {"cases_done", report.cases},
                        {"resume_from", report.next_case}};
  if (options.repeat > 1) j["repeat"] = options.repeat;
  j["shrink"] = {{"candidates_max", options.shrink.candidates_max},
                 {"seconds_max", options.shrink.seconds_max}};
  if (!options.mutant_name.empty()) j["mutant"] = options.mutant_name;
  nlohmann::json findings = nlohmann::json::array();
  nlohmann::json measured = nlohmann::json::array();
  for (const KernelFinding& f : report.findings) {
    nlohmann::json entry = {{"signature", f.signature.to_string()},
                            {"key", f.signature.key()},
                            {"classification", to_string(f.signature.classification)},
                            {"difference", f.signature.difference},
                            {"shape", f.signature.shape},
                            {"features", f.signature.features},
                            {"first_case_seed", f.first_case_seed},
                            {"size", f.first_size},
                            {"cases", f.cases},
                            {"skipped", f.skipped},
                            {"failure", f.failure}};
    nlohmann::json rates = {{"signature", f.signature.to_string()},
                            {"runs", f.runs.runs},
                            {"failed_runs", f.runs.failed}};
    if (!f.rows_in_runs.empty()) rates["what_each_run_saw"] = f.rows_in_runs;
    if (const auto& cx = f.counterexample) {
      entry["counterexample"] = {{"failure", cx->failure},
                                 {"case", cx->description},
                                 {"requests", cx->requests},
                                 {"copies", cx->copies},
                                 {"shrunk", cx->shrink_kept},
                                 {"shrink_steps", cx->shrink_steps},
                                 {"shrink_candidates_tried", cx->shrink_tried},
                                 {"shrink_timed_out", cx->shrink_timed_out},
                                 {"original_dir", cx->original_dir.string()},
                                 {"shrunk_dir", cx->shrunk_dir.string()}};
      if (cx->difference) entry["counterexample"]["difference"] = to_json(*cx->difference);
      rates["saved_case_runs"] = cx->saved_runs.runs;
      rates["saved_case_failed_runs"] = cx->saved_runs.failed;
    }
    findings.push_back(std::move(entry));
    measured.push_back(std::move(rates));
  }
  j["findings"] = std::move(findings);
  j["measured"] = {{"rates", std::move(measured)}};
  return j;
}

} // namespace mc::fuzz
