#include "fuzz/campaign/report_merge.h"

#include "fuzz/campaign/campaign.h"
#include "fuzz/shard.h"
#include "model/coverage.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

namespace mc::fuzz {
namespace {

using Json = nlohmann::json;

// The fields of a level's report that its cases decide. Every other field is an option of the
// campaign, the same in all its parts (a field added later is one too, until it is listed here).
constexpr std::string_view kResultFields[] = {"cases",
                                              "cases_by_kind",
                                              "cases_by_size_class",
                                              "cases_by_preset",
                                              "cases_by_runner",
                                              "cases_by_scheduling",
                                              "steps",
                                              "copies_compared",
                                              "arena_bytes_compared",
                                              "bytes_compared",
                                              "failing_cases",
                                              "coverage",
                                              "coverage_missing",
                                              "held",
                                              "findings",
                                              "measured",
                                              "stopped",
                                              "backend_replaced",
                                              "first_case",
                                              "interrupted",
                                              "shard"};
constexpr std::string_view kSummedCounts[] = {"cases",          "steps",        "copies_compared",
                                              "arena_bytes_compared", "bytes_compared",
                                              "failing_cases"};
constexpr std::string_view kSummedMaps[] = {"cases_by_kind", "cases_by_size_class",
                                            "cases_by_preset", "cases_by_runner",
                                            "cases_by_scheduling"};
constexpr std::string_view kLevels[] = {"kernel", "engine"};

std::string quoted(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// One part's report of one level, and the cases it covers: those of its shard from `begin`
// (inclusive) to `end` (exclusive), `end` being where a continuation starts.
struct LevelPart {
  std::string name;
  const Json* report = nullptr;
  Shard shard;
  std::int64_t first_case = 0; // as given to the campaign (--resume-from)
  std::int64_t begin = 0;      // the shard's first case at or after first_case
  std::int64_t end = 0;
  std::int64_t cases = 0;
  bool interrupted() const { return report->contains("interrupted"); }
};

std::string shard_name(const Shard& shard) {
  if (shard.whole()) return "the campaign";
  return fmt::format("shard {}/{}", shard.index, shard.count);
}

LevelPart read_part(const std::string& name, const Json& report, std::string_view level) {
  LevelPart p{.name = name, .report = &report};
  try {
    if (!report.is_object() || report.at("level").get<std::string>() != level)
      model::fail_input("{}: not a {}-level fuzz report", name, level);
    if (report.contains("shard"))
      p.shard = Shard{.index = report.at("shard").at("index").get<std::int64_t>(),
                      .count = report.at("shard").at("count").get<std::int64_t>()};
    p.first_case = report.value("first_case", std::int64_t{0});
    p.cases = report.at("cases").get<std::int64_t>();
    const std::size_t findings = report.at("findings").size();
    if (report.at("measured").at("rates").size() != findings)
      model::fail_input("{}: its findings and measured rates differ in number", name);
    report.at("coverage").at("counts");
    report.at("seed");
  } catch (const Json::exception& e) {
    model::fail_input("{}: not a fuzz report ({})", name, e.what());
  }
  if (p.shard.count < 1 || p.shard.index < 0 || p.shard.index >= p.shard.count)
    model::fail_input("{}: shard {}/{} is no shard", name, p.shard.index, p.shard.count);
  if (p.first_case < 0 || p.cases < 0) model::fail_input("{}: negative case counts", name);
  p.begin = first_case_of(p.shard, p.first_case);
  p.end = p.begin + p.cases * p.shard.count;
  if (p.interrupted() && report.at("interrupted").value("resume_from", p.end) != p.end)
    model::fail_input("{}: it resumes from case {} but ran {} cases from case {}", name,
                      report.at("interrupted").value("resume_from", p.end), p.cases, p.begin);
  return p;
}

// Every option the same in every part.
void check_one_campaign(const std::vector<LevelPart>& parts) {
  const LevelPart& a = parts.front();
  for (const LevelPart& b : parts) {
    std::set<std::string> keys;
    for (const LevelPart* p : {&a, &b})
      for (const auto& [key, value] : p->report->items())
        if (std::ranges::find(kResultFields, key) == std::end(kResultFields)) keys.insert(key);
    for (const std::string& key : keys) {
      const Json missing = "(none)";
      const Json& va = a.report->contains(key) ? a.report->at(key) : missing;
      const Json& vb = b.report->contains(key) ? b.report->at(key) : missing;
      if (va != vb)
        model::fail_input("{} and {} are not parts of one campaign: '{}' is {} in {} and {} in {}",
                          a.name, b.name, key, quoted(va), a.name, quoted(vb), b.name);
    }
    if (a.report->contains("coverage_missing") != b.report->contains("coverage_missing"))
      model::fail_input("{} and {} are not parts of one campaign: one of them required coverage "
                        "(--require-coverage) and the other did not",
                        a.name, b.name);
    if (a.shard.count != b.shard.count)
      model::fail_input("{} is {} and {} is {}: different shard counts", a.name,
                        shard_name(a.shard), b.name, shard_name(b.shard));
  }
}

std::string cases_text(const Shard& shard, std::int64_t from, std::int64_t to_exclusive) {
  const std::string of = shard.whole() ? "" : fmt::format(" of {}", shard_name(shard));
  if (to_exclusive < 0) return fmt::format("the cases{} from {} on", of, from);
  return fmt::format("cases {} to {}{}", from, to_exclusive - shard.count, of);
}

// The parts of one level, in shard order and case order within a shard. Refuses a shard run
// twice, cases covered by two parts and (unless `partial`) cases covered by none; returns what
// is not covered.
std::vector<std::string> order_parts(std::vector<LevelPart>& parts, bool partial) {
  std::sort(parts.begin(), parts.end(), [](const LevelPart& x, const LevelPart& y) {
    return std::pair(x.shard.index, x.begin) < std::pair(y.shard.index, y.begin);
  });
  std::vector<std::string> uncovered;
  const std::int64_t count = parts.front().shard.count;
  auto part = parts.begin();
  for (std::int64_t k = 0; k < count; ++k) {
    const Shard shard{.index = k, .count = count};
    if (part == parts.end() || part->shard.index != k) {
      uncovered.push_back(fmt::format("no report has {}", shard_name(shard)));
      continue;
    }
    if (part->begin != k)
      uncovered.push_back(fmt::format("no report has {} (before {})", cases_text(shard, k, part->begin),
                                      part->name));
    for (auto next = part + 1; next != parts.end() && next->shard.index == k; part = next++) {
      if (next->begin == part->begin && next->cases == part->cases)
        model::fail_input("{} and {} are the same part ({} from case {}, {} cases): give each "
                          "report once",
                          part->name, next->name, shard_name(shard), part->begin, part->cases);
      if (next->begin < part->end)
        model::fail_input("{} and {} overlap: both ran case {}", part->name, next->name,
                          next->begin);
      if (next->begin > part->end)
        uncovered.push_back(fmt::format("no report has {} (between {} and {})",
                                        cases_text(shard, part->end, next->begin), part->name,
                                        next->name));
    }
    ++part;
  }
  if (!uncovered.empty() && !partial)
    model::fail_input("{}: give every part's report, or --partial to merge what is there",
                      uncovered.front());
  return uncovered;
}

struct Finding {
  std::string key;
  std::uint64_t first_case_seed = 0;
  std::int64_t cases = 0;
  const Json* entry = nullptr;
  const Json* rate = nullptr;
};

// Each signature once: from its earliest case, with the failing cases of every part; in the
// order of their first cases, as one campaign lists them.
void merge_findings(const std::vector<LevelPart>& parts, Json& merged) {
  std::map<std::string, Finding> by_key;
  for (const LevelPart& p : parts) {
    const Json& findings = p.report->at("findings");
    const Json& rates = p.report->at("measured").at("rates");
    for (std::size_t i = 0; i < findings.size(); ++i) {
      Finding f{.key = findings[i].at("key").get<std::string>(),
                .first_case_seed = findings[i].at("first_case_seed").get<std::uint64_t>(),
                .cases = findings[i].at("cases").get<std::int64_t>(),
                .entry = &findings[i],
                .rate = &rates[i]};
      auto [at, inserted] = by_key.try_emplace(f.key, f);
      if (inserted) continue;
      at->second.cases += f.cases;
      if (f.first_case_seed < at->second.first_case_seed) {
        at->second.first_case_seed = f.first_case_seed;
        at->second.entry = f.entry;
        at->second.rate = f.rate;
      }
    }
  }
  std::vector<Finding> ordered;
  for (auto& [key, f] : by_key)
    ordered.push_back(f);
  std::sort(ordered.begin(), ordered.end(), [](const Finding& x, const Finding& y) {
    return x.first_case_seed < y.first_case_seed;
  });
  Json findings = Json::array();
  Json rates = Json::array();
  bool failing = false;
  for (const Finding& f : ordered) {
    Json entry = *f.entry;
    entry["cases"] = f.cases;
    failing = failing || !entry.at("skipped").get<bool>();
    findings.push_back(std::move(entry));
    rates.push_back(*f.rate);
  }
  merged["findings"] = std::move(findings);
  merged["measured"]["rates"] = std::move(rates);
  if (merged.contains("held")) merged["held"] = !failing;
}

void merge_counts(const std::vector<LevelPart>& parts, Json& merged) {
  for (const std::string_view field : kSummedCounts) {
    const std::string key(field);
    if (!merged.contains(key)) continue;
    std::int64_t sum = 0;
    for (const LevelPart& p : parts)
      sum += p.report->at(key).get<std::int64_t>();
    merged[key] = sum;
  }
  for (const std::string_view field : kSummedMaps) {
    const std::string key(field);
    if (!merged.contains(key)) continue;
    std::map<std::string, std::int64_t> sum;
    for (const LevelPart& p : parts)
      for (const auto& [name, n] : p.report->at(key).items())
        sum[name] += n.get<std::int64_t>();
    merged[key] = sum;
  }
  model::Coverage coverage = model::coverage_from_json(parts.front().report->at("coverage"));
  for (auto p = parts.begin() + 1; p != parts.end(); ++p)
    coverage.merge(model::coverage_from_json(p->report->at("coverage")));
  merged["coverage"] = Json::parse(model::to_json(coverage).dump());
  if (!merged.contains("coverage_missing")) return;
  // A feature some part was required to reach and missed, still unreached by every part.
  std::set<std::string> missed;
  for (const LevelPart& p : parts)
    for (const Json& name : p.report->at("coverage_missing"))
      missed.insert(name.get<std::string>());
  Json missing = Json::array();
  for (const model::CoverageFeature& feature : model::coverage_catalogue())
    if (missed.count(std::string(feature.name)) != 0 && coverage.count(feature.name) == 0)
      missing.push_back(feature.name);
  merged["coverage_missing"] = std::move(missing);
}

// The signal a report names (model::signal_name), for the exit code 128 + signal.
int signal_number(const std::string& name) {
  if (name == "SIGINT") return SIGINT;
  if (name.rfind("signal ", 0) == 0) return std::atoi(name.c_str() + 7);
  return SIGTERM;
}

// What is left for a continuation: the last part of a shard that was interrupted or stopped.
void merge_endings(const std::vector<LevelPart>& parts, Json& merged, int& signal) {
  const bool sharded = !parts.front().shard.whole();
  Json interrupted_shards = Json::array();
  std::vector<std::string> stopped;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const LevelPart& p = parts[i];
    if (p.report->contains("backend_replaced") && !merged.contains("backend_replaced"))
      merged["backend_replaced"] = p.report->at("backend_replaced");
    const bool last_of_shard = i + 1 == parts.size() || parts[i + 1].shard.index != p.shard.index;
    if (!last_of_shard) continue;
    const std::string prefix = sharded ? shard_name(p.shard) + ": " : "";
    if (p.report->contains("stopped"))
      stopped.push_back(prefix + p.report->at("stopped").get<std::string>());
    if (!p.interrupted()) continue;
    const Json& what = p.report->at("interrupted");
    if (signal == 0) signal = signal_number(what.at("signal").get<std::string>());
    interrupted_shards.push_back({{"shard", p.shard.index},
                                  {"signal", what.at("signal")},
                                  {"resume_from", what.at("resume_from")}});
  }
  if (!stopped.empty()) merged["stopped"] = fmt::format("{}", fmt::join(stopped, "; "));
  if (interrupted_shards.empty()) return;
  Json interrupted = {{"signal", interrupted_shards.front().at("signal")},
                      {"cases_done", merged.at("cases")},
                      {"resume_from", interrupted_shards.front().at("resume_from")}};
  if (sharded) {
    interrupted.erase("resume_from");
    interrupted["shards"] = std::move(interrupted_shards);
  }
  merged["interrupted"] = std::move(interrupted);
}

Json merge_level(std::vector<LevelPart> parts, bool partial, MergedReports& out) {
  MC_ASSERT(!parts.empty());
  check_one_campaign(parts);
  const std::vector<std::string> uncovered = order_parts(parts, partial);
  Json merged = *parts.front().report;
  for (const char* key : {"shard", "first_case", "interrupted", "stopped", "backend_replaced"})
    merged.erase(key);
  merge_counts(parts, merged);
  merge_findings(parts, merged);
  merge_endings(parts, merged, out.interrupted_signal);
  std::int64_t first_case = parts.front().first_case;
  for (const LevelPart& p : parts)
    first_case = std::min(first_case, p.first_case);
  if (first_case > 0) merged["first_case"] = first_case;
  if (!uncovered.empty()) merged["partial"] = uncovered;
  out.shard_count = parts.front().shard.count;
  return merged;
}

} // namespace

MergedReports merge_reports(const std::vector<ReportPart>& given, bool partial) {
  if (given.empty()) model::fail_input("merge: no reports given");
  // Reports of an older version are read as the current one says the same.
  std::vector<ReportPart> parts = given;
  for (ReportPart& p : parts)
    p.report = upgrade_report(std::move(p.report));
  MergedReports out{.parts = static_cast<int>(parts.size())};
  // A report of one level has "level"; one of --level both holds a report of each level that ran.
  const bool both = !parts.front().report.contains("level");
  for (const ReportPart& p : parts) {
    if (!p.report.is_object()) model::fail_input("{}: not a fuzz report", p.name);
    if (p.report.contains("level") == both)
      model::fail_input("{} and {} are not parts of one campaign: {} holds both levels "
                        "(--level both), {} one",
                        parts.front().name, p.name, both ? parts.front().name : p.name,
                        both ? p.name : parts.front().name);
  }
  if (!both) {
    const Json& level_value = parts.front().report.at("level");
    const std::string level = level_value.is_string() ? level_value.get<std::string>() : "";
    if (level != "kernel" && level != "engine")
      model::fail_input("{}: not a fuzz report (level {})", parts.front().name, quoted(level_value));
    for (const ReportPart& p : parts)
      if (p.report.at("level") != level_value)
        model::fail_input("{} and {} are not parts of one campaign: 'level' is {} in {} and {} in "
                          "{}",
                          parts.front().name, p.name, quoted(level_value), parts.front().name,
                          quoted(p.report.at("level")), p.name);
    std::vector<LevelPart> level_parts;
    for (const ReportPart& p : parts)
      level_parts.push_back(read_part(p.name, p.report, level));
    out.report = merge_level(std::move(level_parts), partial, out);
    return out;
  }
  out.report = Json::object();
  for (const std::string_view level : kLevels) {
    std::vector<LevelPart> level_parts;
    for (const ReportPart& p : parts)
      if (p.report.contains(level))
        level_parts.push_back(read_part(p.name, p.report.at(level), level));
    if (!level_parts.empty())
      out.report[std::string(level)] = merge_level(std::move(level_parts), partial, out);
  }
  if (out.report.empty()) model::fail_input("{}: not a fuzz report", parts.front().name);
  return out;
}

} // namespace mc::fuzz
