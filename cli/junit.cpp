#include "cli/junit.h"

#include "cli/output_paths.h"

#include <fmt/format.h>

#include <sstream>

namespace mc::cli {


JunitCase finding_case(const std::string& campaign, const std::string& signature,
                       std::string_view classification, bool skipped, std::int64_t cases,
                       const std::string& failure, const std::string& runs_summary,
                       std::string details) {
  JunitCase jc{.name = fmt::format("{} {}", campaign, signature)};
  if (skipped) {
    jc.skipped = true;
    jc.message = fmt::format("known finding (--skip-signature), {} cases", cases);
    return jc;
  }
  jc.failed = true;
  jc.message = fmt::format("{} [{}, {}]", failure, classification, runs_summary);
  jc.details = std::move(details);
  return jc;
}

namespace {

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const std::string_view entity = c == '&'   ? "&amp;"
                                    : c == '<' ? "&lt;"
                                    : c == '>' ? "&gt;"
                                    : c == '"' ? "&quot;"
                                               : "";
    if (entity.empty())
      out += c;
    else
      out += entity;
  }
  return out;
}

} // namespace

std::string interrupted_line(std::string_view level, std::string_view signal_name,
                             std::int64_t cases_done, std::int64_t resume_from) {
  return fmt::format("{} level: interrupted by {} after {} case{}; continue with --resume-from {}",
                     level, signal_name, cases_done, cases_done == 1 ? "" : "s", resume_from);
}

JunitCase interrupted_case(std::string_view level, std::string_view signal_name,
                           std::int64_t cases_done, std::int64_t resume_from) {
  return {.name = fmt::format("{}-interrupted", level),
          .skipped = true,
          .message = interrupted_line(level, signal_name, cases_done, resume_from)};
}

void write_junit(const std::string& path, const std::string& suite,
                 const std::vector<JunitCase>& cases) {
  std::ostringstream file;
  int failures = 0;
  int skipped = 0;
  double total = 0.0;
  for (const JunitCase& c : cases) {
    failures += c.failed;
    skipped += c.skipped;
    total += c.seconds;
  }
  file << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  file << fmt::format("<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" "
                      "time=\"{:.3f}\">\n",
                      xml_escape(suite), cases.size(), failures, skipped, total);
  for (const JunitCase& c : cases) {
    file << fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"",
                        xml_escape(suite), xml_escape(c.name), c.seconds);
    if (!c.failed && !c.skipped) {
      file << "/>\n";
      continue;
    }
    file << ">\n";
    if (c.failed)
      file << fmt::format("    <failure message=\"{}\">{}</failure>\n", xml_escape(c.message),
                          xml_escape(c.details));
    else
      file << fmt::format("    <skipped message=\"{}\"/>\n", xml_escape(c.message));
    file << "  </testcase>\n";
  }
  file << "</testsuite>\n";
  write_file_atomically("--junit", path, file.str());
}

} // namespace mc::cli
