// JUnit XML for CI systems: one suite, its test cases, failures with a message.
#pragma once

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

// Writes the file; throws model::InputError when it cannot.
void write_junit(const std::string& path, const std::string& suite,
                 const std::vector<JunitCase>& cases);

} // namespace mc::cli
