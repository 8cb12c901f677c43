// The catalogue entries of each level, for `mutants` and the gate's mutant smoke.
#pragma once

#include "fuzz/mutants/mutants.h"

#include <string>
#include <vector>

namespace mc::cli {

// "kernel", "engine" or "both": the jobs of that level in catalogue order (kernel first).
std::vector<fuzz::MutantJob> mutant_jobs(const std::string& level);

} // namespace mc::cli
