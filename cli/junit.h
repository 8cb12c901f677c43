// JUnit XML for CI systems: one suite, its test cases, failures with a message.
#pragma once

#include "fuzz/findings.h"

#include <cstdint>
#include <string>
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
// finding is known (--skip-signature). `details`: the failure's body (case, reproduce line).
JunitCase finding_case(const std::string& campaign, const fuzz::Signature& signature,
                       bool skipped, std::int64_t cases, const std::string& failure,
                       const fuzz::RunTally& runs, std::string details);

// Writes the file; throws model::InputError when it cannot.
void write_junit(const std::string& path, const std::string& suite,
                 const std::vector<JunitCase>& cases);

} // namespace mc::cli
