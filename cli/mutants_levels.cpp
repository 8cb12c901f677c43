#include "cli/mutants_levels.h"

#include "cli/fuzz_engine.h"
#include "gpu/mutant.h"

namespace mc::cli {

std::vector<fuzz::MutantJob> mutant_jobs(const std::string& level) {
  std::vector<fuzz::MutantJob> jobs;
  for (const gpu::MutantInfo& info : gpu::mutant_catalogue()) {
    if (info.level == gpu::MutantLevel::kernel && level != "engine")
      jobs.push_back(fuzz::kernel_mutant_job(info));
    if (info.level != gpu::MutantLevel::kernel && level != "kernel")
      jobs.push_back(runner_mutant_job(info));
  }
  return jobs;
}

} // namespace mc::cli
