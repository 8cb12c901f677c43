#include "fuzz/campaign/kernel_campaign.h"

#include "fuzz/campaign/kernel_shrink.h"
#include "fuzz/campaign/kernel_signature.h"
#include "fuzz/isolate.h"
#include "fuzz/run_case.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/output_file.h"
#include "model/request_arrays.h"
#include "oracle/launch.h"
#include "show/pictures.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::fuzz {
namespace {

// The report files of a saved case: what failed, how reliably, and the case.
void write_reports(const LaunchSpec& spec, const Finding& finding, const RunTally& runs,
                   const std::optional<Difference>& difference, const std::string& failure,
                   const CampaignOptions& options, const std::filesystem::path& dir) {
  nlohmann::json report = {{"failure", failure},
                           {"backend", options.backend_name},
                           {"mutant", options.mutant},
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
std::filesystem::path write_picture(const LaunchSpec& spec, const Finding& finding,
                                    const RunTally& runs, const std::string& failure,
                                    const CampaignOptions& options, const LaunchRunner& backend,
                                    const std::filesystem::path& dir) {
  const model::LaunchCase launch = materialize(spec);
  const std::string backend_args = fmt::format(
      "--backend {}{}", options.backend_name,
      options.mutant.empty() ? "" : " --mutant " + options.mutant);
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
                  options.mutant.empty() ? "" : ", mutant " + options.mutant);
  const std::filesystem::path file = dir / "report.html";
  const std::string html =
      show::kernel_picture(launch, backend, options.isolate ? run_isolated_payload : nullptr,
                           actual_name, std::move(header));
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
  FindingRecorder(const CampaignOptions& options, const CaseJudge& judge)
      : options_(options), judge_(judge) {}

  // `backend` runs the pictures' actual side. `can_rerun` false: the device context is lost and
  // nothing replaced it; the original case is saved as it is.
  void record(Finding& f, const rc::Shrinkable<LaunchSpec>& drawn, const CaseVerdict& first,
              const LaunchRunner& backend, bool can_rerun) {
    const std::uint64_t case_seed = f.first_case_seed;
    const std::string key = f.signature.key();
    tally(f, first, key);
    for (int i = 0; i < options_.reruns && can_rerun; ++i)
      tally(f, judge_(drawn.value()), key);
    f.signature.classification = f.runs.classify();
    if (f.signature.classification != Classification::nondeterministic) f.rows_in_runs.clear();
    if (f.skipped) return;

    const LaunchRunner picture_backend = can_rerun ? backend : LaunchRunner{};
    KernelCounterexample cx{.case_seed = case_seed, .size = f.first_size};
    const std::string stem = fmt::format("kernel-seed{}", case_seed);
    cx.original_dir = options_.out_dir / (stem + "-original");
    save_spec(drawn.value(), cx.original_dir);
    write_reports(drawn.value(), f, f.runs, first.difference, f.failure, options_,
                  cx.original_dir);
    write_picture(drawn.value(), f, f.runs, f.failure, options_, picture_backend,
                  cx.original_dir);

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
    cx.picture = write_picture(shrunk.spec, f, cx.saved_runs, cx.failure, options_,
                               picture_backend, cx.shrunk_dir);
    f.counterexample_json = counterexample_json(cx, options_);
    f.saved_runs = cx.saved_runs;
    f.description = cx.description;
    f.reproduce = f.counterexample_json.at("reproduce").get<std::string>();
    f.counterexample_dir = cx.shrunk_dir;
    f.counterexample = std::move(cx);
  }

private:
  static nlohmann::json counterexample_json(const KernelCounterexample& cx,
                                            const CampaignOptions& options) {
    nlohmann::json j{{"failure", cx.failure},
                             {"case", cx.description},
                             {"requests", cx.requests},
                             {"copies", cx.copies},
                             {"shrunk", cx.shrink_kept},
                             {"shrink_steps", cx.shrink_steps},
                             {"shrink_candidates_tried", cx.shrink_tried},
                             {"shrink_timed_out", cx.shrink_timed_out},
                             {"original_dir", cx.original_dir.string()},
                             {"shrunk_dir", cx.shrunk_dir.string()}};
    if (cx.difference) j["difference"] = to_json(*cx.difference);
    j["reproduce"] = fmt::format("mambacheck case {} {}{} --check", cx.shrunk_dir.string(),
                                 options.backend_args,
                                 options.mutant.empty() ? "" : " --mutant " + options.mutant);
    return j;
  }

  static void tally(Finding& f, const CaseVerdict& v, const std::string& key) {
    add_run(f.runs, v.failure, v.signature.key(), key, v.backend_error);
    if (!v.failure) {
      f.rows_in_runs.emplace_back("held");
      return;
    }
    const std::string& fingerprint = f.runs.run_failures.back();
    const std::string features = fmt::format("{}", fmt::join(v.signature.features, ", "));
    std::string line =
        v.row ? fmt::format("batch row {} ({}): {}", *v.row, features.empty() ? "-" : features,
                            fingerprint)
              : fingerprint;
    for (const std::string& pair : v.pairs)
      line += "\n      " + pair;
    f.rows_in_runs.push_back(std::move(line));
  }

  const CampaignOptions& options_;
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

// The verdict of a case from how the process that ran it ended: the payload's verdict, or a
// crash or timeout.
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

} // namespace

CaseVerdict judge_case_isolated(const LaunchSpec& spec, const LaunchRunner& backend,
                                double timeout_seconds) {
  // Runs in the child as soon as it is forked: the references are still good there.
  return isolated_verdict(
      spec.kind,
      run_isolated([&spec, &backend] { return to_json(judge_case(spec, backend)).dump(); },
                   IsolateOptions{.timeout_seconds = timeout_seconds}));
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
  const CampaignOptions c = campaign_options_from_json(setup.at("campaign"));
  const auto [seed, max_size, repeat] = std::tuple(c.seed, c.max_size, c.repeat);
  MC_ASSERT(max_size >= 0 && max_size <= 100 && repeat >= 1);
  const rc::Gen<LaunchSpec> gen =
      gen_launch_spec(gen_options_from_json(setup.at("options").at("gen")));
  return CaseWorkerJob{.run = [=](std::int64_t index) {
    const LaunchSpec spec =
        gen(rc::Random(seed + static_cast<std::uint64_t>(index)), size_of(index, max_size))
            .value();
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

namespace {

// What the level keeps of a case beside the runner's CaseResult.
struct KernelCaseDetail {
  CaseVerdict verdict;
  model::LaunchKind kind = model::LaunchKind::postprocess;
  SizeClass size_class = SizeClass::tiny;
};

CaseResult result_of(CaseVerdict verdict, model::LaunchKind kind, SizeClass size_class) {
  CaseResult r{.failure = verdict.failure, .signature = verdict.signature};
  r.detail = KernelCaseDetail{.verdict = std::move(verdict), .kind = kind, .size_class = size_class};
  return r;
}

const KernelCaseDetail& detail_of(const CaseResult& r) {
  return std::any_cast<const KernelCaseDetail&>(r.detail);
}

} // namespace

struct KernelLevel::State {
  State(const CampaignOptions& campaign_options, KernelLevelOptions level_options)
      : campaign(campaign_options), options(std::move(level_options)),
        gen(gen_launch_spec(options.gen)), backend(options.backend),
        judge([this](const LaunchSpec& spec) { return run(spec); }), recorder(campaign, judge) {}

  // One run of `spec` on the backend (in a forked child where the campaign isolates its runs);
  // a device fault replaces the backend where the campaign can, else nothing more runs here.
  CaseVerdict run(const LaunchSpec& spec) {
    CaseVerdict v = campaign.isolate
                        ? judge_case_isolated(spec, backend, campaign.case_timeout_seconds)
                        : judge_case(spec, backend);
    if (v.device_lost && !device_lost) {
      if (options.replace_backend) {
        backend = options.replace_backend();
        if (backend_replaced.empty())
          backend_replaced = fmt::format(
              "the device faulted and the CUDA context of this process was lost: later runs "
              "went to a worker process, restarted after every fault ({})",
              *v.failure);
      } else {
        device_lost = true;
      }
    }
    return v;
  }

  const CampaignOptions& campaign;
  KernelLevelOptions options;
  rc::Gen<LaunchSpec> gen;
  LaunchRunner backend;
  bool device_lost = false; // and nothing replaced the backend
  std::string backend_replaced;
  CaseJudge judge;
  FindingRecorder recorder;
};

KernelLevel::KernelLevel(const CampaignOptions& campaign, KernelLevelOptions options) {
  MC_ASSERT(options.backend != nullptr);
  MC_ASSERT(campaign.max_size >= 0 && campaign.max_size <= 100);
  MC_ASSERT(!campaign.isolate || !options.replace_backend); // isolation forks: no device here
  state_ = std::make_unique<State>(campaign, std::move(options));
}

KernelLevel::~KernelLevel() = default;

int KernelLevel::size_of(std::int64_t index, std::uint64_t) const {
  return fuzz::size_of(index, state_->campaign.max_size);
}

nlohmann::json KernelLevel::worker_setup() const { return {{"gen", to_json(state_->options.gen)}}; }

CaseResult KernelLevel::run_here(const CaseRef& c) {
  const LaunchSpec spec = state_->gen(rc::Random(c.case_seed), c.size).value();
  CaseVerdict verdict = state_->judge(spec);
  for (int run = 1; run < state_->campaign.repeat && !verdict.failure; ++run)
    verdict = state_->judge(spec);
  return result_of(std::move(verdict), spec.kind, spec.size_class);
}

CaseResult KernelLevel::from_worker(const CaseRef& c, const IsolatedOutcome& outcome) {
  if (outcome.returned()) {
    const nlohmann::json j = nlohmann::json::parse(outcome.payload);
    const std::optional<SizeClass> size_class =
        parse_size_class(j.at("size_class").get<std::string>());
    MC_ASSERT(size_class.has_value());
    return result_of(verdict_from_json(j),
                     model::parse_launch_kind(j.at("kind").get<std::string>()), *size_class);
  }
  // The worker died or timed out on it: what the case was, drawn again here.
  const LaunchSpec spec = state_->gen(rc::Random(c.case_seed), c.size).value();
  return result_of(isolated_verdict(spec.kind, outcome), spec.kind, spec.size_class);
}

std::string KernelLevel::count(const CaseRef&, const CaseResult& result, CampaignReport& report) {
  const KernelCaseDetail& d = detail_of(result);
  ++report.cases_by["kind"][std::string(model::to_string(d.kind))];
  ++report.cases_by["size_class"][std::string(to_string(d.size_class))];
  report.totals["copies_compared"] += d.verdict.copies;
  report.totals["arena_bytes_compared"] += d.verdict.arena_bytes;
  report.coverage.merge(d.verdict.coverage);
  if (report.backend_replaced.empty()) report.backend_replaced = state_->backend_replaced;
  return fmt::format("{} {}", model::to_string(d.kind), to_string(d.size_class));
}

void KernelLevel::record(const CaseRef& c, const CaseResult& result, Finding& f,
                         CampaignReport& report) {
  const rc::Shrinkable<LaunchSpec> drawn = state_->gen(rc::Random(c.case_seed), c.size);
  state_->recorder.record(f, drawn, detail_of(result).verdict, state_->backend,
                          !state_->device_lost);
  if (report.backend_replaced.empty()) report.backend_replaced = state_->backend_replaced;
}

bool KernelLevel::device_lost(const CaseResult&) const { return state_->device_lost; }

void KernelLevel::report_json(const CampaignReport& r, nlohmann::json& j) const {
  write_counts(r, {"copies_compared", "arena_bytes_compared"}, {"kind", "size_class"}, j);
  // What decides which cases are drawn, so that `mambacheck merge` can refuse shards of
  // different campaigns.
  if (!state_->options.gen.kinds.empty()) j["kinds"] = kind_names(state_->options.gen.kinds);
  if (!state_->options.focus.empty()) j["focus"] = state_->options.focus;
}

CampaignReport run_kernel_campaign(const CampaignOptions& campaign,
                                   const KernelLevelOptions& options) {
  KernelLevel level(campaign, options);
  return run_campaign(campaign, level);
}

} // namespace mc::fuzz
