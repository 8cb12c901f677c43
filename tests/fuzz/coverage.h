// Coverage features of a generated case: the names of every bug-class trigger it holds
// (REFERENCE.md 5), computed from the case itself so that the counts say what the
// generator really produced, not what it meant to.
#pragma once

#include "fuzz/gen_launch.h"

#include <string>
#include <vector>

namespace mc::fuzz::testing {

std::vector<std::string> coverage_features(const LaunchSpec& spec);

// Every feature the host generator must reach (the coverage test demands each).
const std::vector<std::string>& required_features();

} // namespace mc::fuzz::testing
