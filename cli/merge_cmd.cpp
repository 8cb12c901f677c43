// `mambacheck merge REPORT...`: the JSON reports of the parts of one fuzz campaign (its shards,
// an interrupted part and its continuation) as the one report and JUnit file the single
// campaign writes, and its exit code: 0 held, 1 a finding (or required coverage missed), 128 +
// the signal while a part is still interrupted (fuzz/campaign/report_merge.h).
#include "cli/commands.h"
#include "cli/junit.h"
#include "cli/output_paths.h"
#include "fuzz/campaign/report_merge.h"
#include "model/coverage.h"
#include "model/errors.h"
#include "model/json_field.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace mc::cli {
namespace {

using Json = nlohmann::json;

struct MergeOptions {
  std::vector<std::string> reports;
  std::string report; // the merged JSON report
  std::string junit;
  bool partial = false;
};

Json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) model::fail_input("merge: cannot read '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return model::parse_json_text(text.str(), model::JsonText::file);
  } catch (const model::FieldError& e) {
    model::fail_input("{}: not a JSON report: {}: {}", path, e.field, e.reason);
  }
}

std::string counts_line(const Json& counts) {
  std::string line;
  for (const auto& [name, n] : counts.items())
    line += fmt::format(" {}={}", name, n.get<std::int64_t>());
  return line;
}

void print_level(const Json& r) {
  const std::string level = r.at("level");
  const double mib = 1 << 20;
  if (level == "kernel") {
    std::cout << fmt::format("kernel level, backend {}, seed {}: {} cases, {} copies and {:.1f} "
                             "MiB of arenas compared\n  kinds:{}\n  sizes:{}\n",
                             r.at("backend").get<std::string>(), r.at("seed").get<std::uint64_t>(),
                             r.at("cases").get<std::int64_t>(),
                             r.at("copies_compared").get<std::int64_t>(),
                             r.at("arena_bytes_compared").get<double>() / mib,
                             counts_line(r.at("cases_by_kind")),
                             counts_line(r.at("cases_by_size_class")));
  } else {
    std::cout << fmt::format(
        "engine level, backend {}, seed {}: {} cases, {} steps, {:.1f} MiB "
        "of arenas compared\n  presets:{}\n  runners:{}\n  scheduling:{}\n",
        r.at("backend").get<std::string>(), r.at("seed").get<std::uint64_t>(),
        r.at("cases").get<std::int64_t>(), r.at("steps").get<std::int64_t>(),
        r.at("bytes_compared").get<double>() / mib, counts_line(r.at("cases_by_preset")),
        counts_line(r.at("cases_by_runner")), counts_line(r.at("cases_by_scheduling")));
  }
  std::cout << model::coverage_table(model::coverage_from_json(r.at("coverage")));
  if (r.contains("coverage_missing") && !r.at("coverage_missing").empty())
    std::cout << fmt::format("COVERAGE: the {} level never reached required features: {}\n", level,
                             fmt::join(r.at("coverage_missing").get<std::vector<std::string>>(),
                                       ", "));
  if (r.contains("stopped"))
    std::cout << fmt::format("{} level: stopped early: {}\n", level,
                             r.at("stopped").get<std::string>());
  if (r.contains("partial"))
    for (const Json& gap : r.at("partial"))
      std::cout << fmt::format("{} level: PARTIAL: {}\n", level, gap.get<std::string>());
  const Json& findings = r.at("findings");
  if (findings.empty()) {
    std::cout << fmt::format("{} level: all cases held\n", level);
    return;
  }
  std::cout << fmt::format("{} level: {} finding{} ({} failing cases):\n", level, findings.size(),
                           findings.size() == 1 ? "" : "s",
                           r.at("failing_cases").get<std::int64_t>());
  const Json& rates = r.at("measured").at("rates");
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Json& f = findings[i];
    std::string where;
    if (f.contains("counterexample"))
      where = ", " + f.at("counterexample").at("reproduce").get<std::string>();
    std::cout << fmt::format("  {} {}: {} cases, failed {} of {} runs{}\n",
                             f.at("skipped").get<bool>() ? "known" : "FAILS",
                             f.at("signature").get<std::string>(), f.at("cases").get<std::int64_t>(),
                             rates[i].at("failed_runs").get<int>(), rates[i].at("runs").get<int>(),
                             where);
  }
}

// The lines and JUnit cases of what is still interrupted: the campaign's resume point, or each
// shard's.
void interrupted_cases(const Json& r, std::int64_t count, std::vector<JunitCase>& junit) {
  if (!r.contains("interrupted")) return;
  const std::string level = r.at("level");
  const Json& what = r.at("interrupted");
  if (!what.contains("shards")) {
    const JunitCase jc = interrupted_case(level, what.at("signal").get<std::string>(),
                                          what.at("cases_done").get<std::int64_t>(),
                                          what.at("resume_from").get<std::int64_t>());
    std::cout << jc.message << "\n";
    junit.push_back(jc);
    return;
  }
  for (const Json& shard : what.at("shards")) {
    const std::int64_t k = shard.at("shard").get<std::int64_t>();
    JunitCase jc{.name = fmt::format("{}-interrupted-shard-{}-of-{}", level, k, count),
                 .skipped = true,
                 .message = fmt::format("{} level: shard {}/{} interrupted by {}; continue it with "
                                        "--shard {}/{} --resume-from {}",
                                        level, k, count, shard.at("signal").get<std::string>(), k,
                                        count, shard.at("resume_from").get<std::int64_t>())};
    std::cout << jc.message << "\n";
    junit.push_back(std::move(jc));
  }
}

// The JUnit cases the single campaign writes for this level: one per signature (or one passing
// case), and the interruption (the kernel level lists it last, the engine level first).
std::vector<JunitCase> level_junit(const Json& r, std::int64_t shard_count) {
  const std::string level = r.at("level");
  const std::string campaign = fmt::format("{}-{}-seed{}", level, r.at("backend").get<std::string>(),
                                           r.at("seed").get<std::uint64_t>());
  std::vector<JunitCase> interrupted;
  interrupted_cases(r, shard_count, interrupted);
  std::vector<JunitCase> out;
  if (level == "engine") out = interrupted;
  const Json& findings = r.at("findings");
  const Json& rates = r.at("measured").at("rates");
  if (findings.empty()) out.push_back(JunitCase{.name = campaign});
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Json& f = findings[i];
    std::string details;
    if (f.contains("counterexample"))
      details = fmt::format("{}\nreproduce: {}", f.at("counterexample").at("case").get<std::string>(),
                            f.at("counterexample").at("reproduce").get<std::string>());
    out.push_back(finding_case(
        campaign, f.at("signature").get<std::string>(), f.at("classification").get<std::string>(),
        f.at("skipped").get<bool>(), f.at("cases").get<std::int64_t>(),
        f.at("failure").get<std::string>(),
        fmt::format("failed {} of {} runs", rates[i].at("failed_runs").get<int>(),
                    rates[i].at("runs").get<int>()),
        std::move(details)));
  }
  if (level == "kernel") out.insert(out.end(), interrupted.begin(), interrupted.end());
  return out;
}

bool level_fails(const Json& r) {
  if (r.contains("coverage_missing") && !r.at("coverage_missing").empty()) return true;
  for (const Json& f : r.at("findings"))
    if (!f.at("skipped").get<bool>()) return true;
  return false;
}

int run_merge(const MergeOptions& o) {
  check_output_file("--report", o.report);
  check_output_file("--junit", o.junit);
  std::vector<fuzz::ReportPart> parts;
  for (const std::string& path : o.reports)
    parts.push_back({.name = path, .report = read_report(path)});
  const fuzz::MergedReports merged = fuzz::merge_reports(parts, o.partial);
  std::cout << fmt::format("merge: {} report{}{}\n", merged.parts, merged.parts == 1 ? "" : "s",
                           merged.shard_count > 1
                               ? fmt::format(", the shards of a campaign dealt {} ways",
                                             merged.shard_count)
                               : "");
  std::vector<const Json*> levels;
  if (merged.report.contains("level")) {
    levels.push_back(&merged.report);
  } else {
    for (const char* level : {"kernel", "engine"})
      if (merged.report.contains(level)) levels.push_back(&merged.report.at(level));
  }
  std::vector<JunitCase> junit;
  bool fails = false;
  for (const Json* level : levels) {
    print_level(*level);
    for (JunitCase& jc : level_junit(*level, merged.shard_count))
      junit.push_back(std::move(jc));
    fails = fails || level_fails(*level);
  }
  write_json_file("--report", o.report, merged.report);
  if (!o.junit.empty()) write_junit(o.junit, "mambacheck.fuzz", junit);
  if (merged.interrupted_signal != 0) return 128 + merged.interrupted_signal;
  return fails ? kExitMismatch : kExitOk;
}

void add_merge_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Merge the JSON reports of a campaign's shards (and of an interrupted part and its "
               "--resume-from continuation) into the single campaign's report, JUnit and exit code");
  cmd->add_option("REPORT", o->reports, "fuzz --report files of one campaign's parts")
      ->required();
  cmd->add_option("--report", o->report, "Write the merged JSON report");
  cmd->add_option("--junit", o->junit, "Write JUnit XML of the merged campaign");
  cmd->add_flag("--partial", o->partial,
                "Merge even when cases are in no report (a shard missing): the report lists them "
                "under \"partial\"");
  cmd->callback([o, &action] { action = [o] { return run_merge(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_merge_command);

} // namespace mc::cli
