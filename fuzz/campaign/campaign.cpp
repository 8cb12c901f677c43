#include "fuzz/campaign/campaign.h"

#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>

namespace mc::fuzz {

std::int64_t CampaignReport::total(const std::string& name) const {
  const auto it = totals.find(name);
  return it == totals.end() ? 0 : it->second;
}

const Finding* CampaignReport::first_failing() const {
  const auto it = std::ranges::find_if(findings, [](const Finding& f) { return !f.skipped; });
  return it == findings.end() ? nullptr : &*it;
}

std::int64_t CampaignReport::failing_cases() const {
  std::int64_t n = 0;
  for (const Finding& f : findings)
    n += f.cases;
  return n;
}

namespace {

using Clock = std::chrono::steady_clock;

// The cases in flight, in case order: in case workers, `jobs` at a time; otherwise one at a
// time in this process.
class CasesInFlight {
public:
  CasesInFlight(const CampaignOptions& options, CampaignLevel& level)
      : options_(options), level_(level) {
    start_pool();
  }

  // The level's setup changed (none in flight): workers read it once, so they start afresh.
  void restart() {
    MC_ASSERT(started_.empty());
    pool_.reset();
    start_pool();
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

  void start(const CaseRef& c) {
    if (pool_)
      pool_->start(c.index);
    else
      results_.push_back(level_.run_here(c));
    started_.push_back(c);
  }

  // The oldest case and what it gave (waits for it).
  std::pair<CaseRef, CaseResult> take() {
    MC_ASSERT(!started_.empty());
    const CaseRef c = started_.front();
    started_.pop_front();
    if (pool_) return {c, level_.from_worker(c, pool_->take_oldest())};
    CaseResult result = std::move(results_.front());
    results_.pop_front();
    return {c, std::move(result)};
  }

private:
  void start_pool() {
    if (!options_.workers) return;
    CaseWorkerStart start = *options_.workers;
    start.setup["level"] = level_.name();
    start.setup["campaign"] = options_json(options_);
    start.setup["options"] = level_.worker_setup();
    // A case runs all its repeats in its worker.
    start.options.timeout_seconds = options_.case_timeout_seconds * options_.repeat;
    pool_.emplace(std::move(start), options_.jobs);
  }

  const CampaignOptions& options_;
  CampaignLevel& level_;
  std::optional<CaseWorkerPool> pool_;
  std::deque<CaseRef> started_;
  std::deque<CaseResult> results_; // run in this process
};

} // namespace

CampaignReport run_campaign(const CampaignOptions& o, CampaignLevel& level) {
  MC_ASSERT(o.reruns >= 0 && o.repeat >= 1);
  MC_ASSERT(o.jobs >= 1 && (o.jobs == 1 || o.workers));
  const Clock::time_point start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  CampaignReport report{.level = level.name(),
                        .coverage = model::Coverage::empty(level.coverage_level())};
  CasesInFlight flight(o, level);
  const std::int64_t stride = o.shard.count;
  std::int64_t next = first_case_of(o.shard, o.first_case); // the next case to start
  report.next_case = next;
  bool stop = false;
  const auto may_start = [&] {
    if (stop || next >= o.cases_max) return false;
    if (o.seconds_max > 0 && elapsed() >= o.seconds_max) return false;
    if (model::interrupted()) {
      report.interrupted = model::interrupt_signal();
      return false;
    }
    const StartGate gate = level.before_start(next, flight.empty(), report);
    if (gate.new_setup) flight.restart();
    return !gate.wait;
  };
  // One case's result, in case order; false: the campaign stops after it.
  const auto count = [&](const CaseRef& c, const CaseResult& result) {
    ++report.cases;
    const std::string what = level.count(c, result, report);
    if (o.on_case) o.on_case(report.cases, what);
    if (!result.failure) return true;
    if (report.findings.empty()) report.seconds_to_failure = elapsed();
    const std::string key = result.signature.key();
    auto known = std::find_if(report.findings.begin(), report.findings.end(),
                              [&key](const Finding& f) { return f.signature.key() == key; });
    if (known != report.findings.end()) {
      ++known->cases;
    } else {
      flight.settle();
      Finding f{.signature = result.signature,
                .first_case_seed = c.case_seed,
                .first_size = c.size,
                .cases = 1,
                .skipped = skipped_by(result.signature, o.skip_signatures),
                .failure = *result.failure};
      level.record(c, result, f, report);
      report.findings.push_back(std::move(f));
      if (o.on_finding) o.on_finding(report.findings.back());
    }
    if (level.device_lost(result)) {
      report.stopped = fmt::format(
          "the device faulted on case seed {} and the CUDA context of this process is lost; "
          "the cases after it did not run (continue with --resume-from {})",
          c.case_seed, c.index + stride);
      return false;
    }
    return o.keep_going || report.first_failing() == nullptr;
  };
  for (;;) {
    while (flight.has_room() && may_start()) {
      const std::uint64_t case_seed = o.seed + static_cast<std::uint64_t>(next);
      flight.start(
          CaseRef{.index = next, .case_seed = case_seed, .size = level.size_of(next, case_seed)});
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
  report.seconds = elapsed();
  return report;
}

void write_counts(const CampaignReport& r, std::initializer_list<const char*> totals,
                  std::initializer_list<const char*> counts_by, nlohmann::json& j) {
  for (const char* total : totals)
    j[total] = r.total(total);
  for (const char* by : counts_by) {
    const auto it = r.cases_by.find(by);
    j[fmt::format("cases_by_{}", by)] =
        it == r.cases_by.end() ? nlohmann::json::object() : nlohmann::json(it->second);
  }
}

namespace {

nlohmann::json finding_json(const Finding& f) {
  nlohmann::json entry{{"signature", f.signature.to_string()},
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
  if (f.saved()) entry["counterexample"] = f.counterexample_json;
  return entry;
}

nlohmann::json rates_json(const Finding& f) {
  nlohmann::json rates{{"signature", f.signature.to_string()},
                               {"runs", f.runs.runs},
                               {"failed_runs", f.runs.failed}};
  if (!f.rows_in_runs.empty()) rates["what_each_run_saw"] = f.rows_in_runs;
  if (f.saved()) {
    rates["saved_case_runs"] = f.saved_runs.runs;
    rates["saved_case_failed_runs"] = f.saved_runs.failed;
  }
  return rates;
}

} // namespace

nlohmann::json options_json(const CampaignOptions& o) {
  nlohmann::json j{{"backend", o.backend_name},
                   {"seed", o.seed},
                   {"cases_max", o.cases_max},
                   {"max_size", o.max_size},
                   {"reruns", o.reruns},
                   {"shrink",
                    {{"candidates_max", o.shrink.candidates_max},
                     {"seconds_max", o.shrink.seconds_max}}}};
  if (!o.mutant.empty()) j["mutant"] = o.mutant;
  if (!o.external.empty()) j["external"] = o.external;
  if (o.first_case > 0) j["first_case"] = o.first_case;
  if (!o.shard.whole()) j["shard"] = {{"index", o.shard.index}, {"count", o.shard.count}};
  if (o.keep_going) j["keep_going"] = true;
  if (!o.skip_signatures.empty()) j["skip_signatures"] = o.skip_signatures;
  if (o.repeat > 1) j["repeat"] = o.repeat;
  return j;
}

CampaignOptions campaign_options_from_json(const nlohmann::json& j) {
  CampaignOptions o{.seed = j.at("seed").get<std::uint64_t>(),
                    .cases_max = j.at("cases_max").get<std::int64_t>(),
                    .first_case = j.value("first_case", std::int64_t{0}),
                    .max_size = j.at("max_size").get<int>(),
                    .backend_name = j.at("backend").get<std::string>(),
                    .external = j.value("external", std::string()),
                    .mutant = j.value("mutant", std::string()),
                    .shrink = {.candidates_max = j.at("shrink").at("candidates_max").get<int>(),
                               .seconds_max = j.at("shrink").at("seconds_max").get<double>()},
                    .keep_going = j.value("keep_going", false),
                    .reruns = j.at("reruns").get<int>(),
                    .repeat = j.value("repeat", 1),
                    .skip_signatures = j.value("skip_signatures", std::vector<std::string>())};
  if (j.contains("shard"))
    o.shard = {.index = j.at("shard").at("index").get<std::int64_t>(),
               .count = j.at("shard").at("count").get<std::int64_t>()};
  return o;
}

nlohmann::json to_json(const CampaignOptions& o, const CampaignLevel& level,
                       const CampaignReport& r) {
  nlohmann::json j = options_json(o);
  j["version"] = kReportVersion;
  j["level"] = level.name();
  j["cases"] = r.cases;
  level.report_json(r, j);
  j["failing_cases"] = r.failing_cases();
  j["coverage"] = model::to_json(r.coverage);
  j["held"] = r.first_failing() == nullptr;
  if (!r.stopped.empty()) j["stopped"] = r.stopped;
  if (!r.backend_replaced.empty()) j["backend_replaced"] = r.backend_replaced;
  if (r.interrupted != 0)
    j["interrupted"] = {{"signal", model::signal_name(r.interrupted)},
                        {"cases_done", r.cases},
                        {"resume_from", r.next_case}};
  nlohmann::json findings = nlohmann::json::array();
  nlohmann::json rates = nlohmann::json::array();
  for (const Finding& f : r.findings) {
    findings.push_back(finding_json(f));
    rates.push_back(rates_json(f));
  }
  j["findings"] = std::move(findings);
  j["measured"] = {{"rates", std::move(rates)}};
  return j;
}

namespace {

// Case fields added since a report was written, with the value that means what the case did
// then: pad_prompt_tails (padded prompt tails were not drawn before it).
void default_newer_case_fields(nlohmann::json& r) {
  if (r.value("level", "") != "engine" || !r.contains("findings")) return;
  for (nlohmann::json& f : r.at("findings")) {
    if (!f.contains("counterexample")) continue;
    nlohmann::json& ce = f.at("counterexample");
    if (ce.contains("shrunk_case") && ce.at("shrunk_case").is_object() &&
        !ce.at("shrunk_case").contains("pad_prompt_tails"))
      ce.at("shrunk_case")["pad_prompt_tails"] = false;
  }
}

void upgrade_level(nlohmann::json& r) {
  default_newer_case_fields(r);
  if (r.contains("version")) return;
  r["version"] = kReportVersion;
  if (r.contains("result")) { // the kernel level said it in words
    r["held"] = r.at("result") == "held";
    r.erase("result");
  }
  // The engine level named each kind of mutant apart, "none" when absent.
  std::string mutant;
  for (const char* field : {"runner_mutant", "kernel_mutant", "scheduler_mutant"}) {
    if (!r.contains(field)) continue;
    if (r.at(field).is_string() && r.at(field) != "none") mutant = r.at(field).get<std::string>();
    r.erase(field);
  }
  if (!mutant.empty()) r["mutant"] = mutant;
  if (r.value("level", "") != "engine" || !r.contains("findings")) return;
  for (nlohmann::json& f : r.at("findings")) {
    if (!f.contains("features") && f.contains("shape"))
      f["features"] = nlohmann::json::array({f.at("shape")});
    // Replay lines named the mutant's level in the option (`--runner-mutant NAME`), which is
    // now `--mutant NAME`.
    if (!f.contains("counterexample") || !f.at("counterexample").contains("replay")) continue;
    nlohmann::json& replay = f.at("counterexample").at("replay");
    if (!replay.is_string()) continue;
    std::string line = replay.get<std::string>();
    for (const std::string old : {" --runner-mutant ", " --kernel-mutant "})
      for (std::size_t at = line.find(old); at != std::string::npos; at = line.find(old, at))
        line.replace(at, old.size(), " --mutant ");
    replay = line;
  }
}

} // namespace

nlohmann::json upgrade_report(nlohmann::json report) {
  if (!report.is_object()) return report;
  if (report.contains("level")) {
    upgrade_level(report);
    return report;
  }
  for (const char* level : {"kernel", "engine"})
    if (report.contains(level) && report.at(level).is_object()) upgrade_level(report.at(level));
  return report;
}

} // namespace mc::fuzz
