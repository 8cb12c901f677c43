#include "cli/mutant_option.h"

#include "gpu/mutant.h"
#include "model/errors.h"

namespace mc::cli {

void add_mutant_option(CLI::App& cmd, std::vector<std::string>& names, std::string& kernel,
                       std::string& runner, const std::string& help) {
  cmd.add_option("--mutant", names, help);
  // Hidden (no group): what older command lines and saved reproduce lines say.
  cmd.add_option("--kernel-mutant", kernel)->group("");
  cmd.add_option("--runner-mutant", runner)->group("");
}

MutantNames mutants_by_level(const std::vector<std::string>& names, MutantNames legacy) {
  const auto known = [](const std::string& option, const std::string& name,
                        gpu::MutantLevel level) {
    if (name == "none") return;
    const gpu::MutantInfo* info = gpu::find_mutant(name);
    if (info == nullptr || info->level != level)
      model::fail_input("{}: unknown mutant '{}' (see `mambacheck mutants`)", option, name);
  };
  known("--kernel-mutant", legacy.kernel, gpu::MutantLevel::kernel);
  known("--runner-mutant", legacy.runner, gpu::MutantLevel::runner);
  MutantNames out = legacy;
  for (const std::string& name : names) {
    const gpu::MutantInfo* info = gpu::find_mutant(name);
    if (info == nullptr)
      model::fail_input("--mutant: unknown mutant '{}' (see `mambacheck mutants`)", name);
    std::string& slot = info->level == gpu::MutantLevel::kernel   ? out.kernel
                        : info->level == gpu::MutantLevel::runner ? out.runner
                                                                  : out.scheduler;
    if (slot != "none")
      model::fail_input("--mutant: two {} mutants ('{}' and '{}'): give one of each level",
                        gpu::to_string(info->level), slot, name);
    slot = name;
  }
  return out;
}

} // namespace mc::cli
