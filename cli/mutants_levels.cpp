#include "cli/mutants_levels.h"

#include "cli/fuzz_engine.h"

namespace mc::cli {

std::vector<fuzz::MutantJob> mutant_jobs(const std::string& level) {
  std::vector<fuzz::MutantJob> jobs;
  if (level != "engine") jobs = fuzz::kernel_mutant_jobs();
  if (level != "kernel") {
    std::vector<fuzz::MutantJob> engine = runner_mutant_jobs();
    jobs.insert(jobs.end(), engine.begin(), engine.end());
  }
  return jobs;
}

} // namespace mc::cli
