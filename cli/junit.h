// JUnit XML for CI systems: one suite, its test cases, failures with a message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mc::cli {

struct JunitCase {
  std::string name;
  double seconds = 0.0;
  bool failed = false;
  bool skipped = false;
  std::string message; // failure or skip message
  std::string details; // body text of the failure
};

// The test case of one finding of a campaign (fuzz/findings.h): failed, or skipped when the
// finding is known (--skip-signature). The signature as printed, its classification, and the
// runs summary ("failed 6 of 6 runs"), as a report has them; `details`: the failure's body
// (case, reproduce line).
JunitCase finding_case(const std::string& campaign, const std::string& signature,
                       std::string_view classification, bool skipped, std::int64_t cases,
                       const std::string& failure, const std::string& runs_summary,
                       std::string details);

// A campaign stopped by SIGINT or SIGTERM between two cases: one line saying how far it got
// and how to go on ("kernel level: interrupted by SIGINT after 812 cases; continue with
// --resume-from 812"), and the same as a skipped test case, so CI shows it. The signal as
// model::signal_name and a report name it ("SIGTERM").
std::string interrupted_line(std::string_view level, std::string_view signal_name,
                             std::int64_t cases_done, std::int64_t resume_from);
JunitCase interrupted_case(std::string_view level, std::string_view signal_name,
                           std::int64_t cases_done, std::int64_t resume_from);

// Writes the file (through a temporary, renamed into place); throws model::InputError when the
// place cannot be written, model::EnvironmentError when the bytes cannot.
void write_junit(const std::string& path, const std::string& suite,
                 const std::vector<JunitCase>& cases);

} // namespace mc::cli
