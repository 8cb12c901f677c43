// The mutant catalogue (gpu/mutant.h), generated from its two lists.
#include "gpu/mutant.h"

#include <array>

namespace mc::gpu {
namespace {

#define MC_KERNEL_MUTANT_INFO(name, bug_class, schedule, description)                              \
  MutantInfo{#name, MutantLevel::kernel, bug_class, description, MutantSchedule::schedule, true},
#define MC_OUT_OF_BOUNDS_MUTANT_INFO(name, bug_class, schedule, description)                       \
  MutantInfo{#name, MutantLevel::kernel, bug_class, description, MutantSchedule::schedule, false},
#define MC_RUNNER_MUTANT_INFO(name, bug_class, description)                                        \
  MutantInfo{#name, MutantLevel::runner, bug_class, description, MutantSchedule::deterministic,   \
             true},
#define MC_SCHEDULER_MUTANT_INFO(name, bug_class, description)                                     \
  MutantInfo{#name, MutantLevel::scheduler, bug_class, description,                                \
             MutantSchedule::deterministic, true},
// Entry i describes Mutant(i + 1), entry kKernelCount + i RunnerMutant(i + 1): each list's
// entries come in the order of its enum (MC_KERNEL_MUTANTS is the in-bounds list, then the
// out-of-bounds one).
constexpr std::array kCatalogue{MC_KERNEL_MUTANTS_IN_BOUNDS(MC_KERNEL_MUTANT_INFO)
                                    MC_KERNEL_MUTANTS_OUT_OF_BOUNDS(MC_OUT_OF_BOUNDS_MUTANT_INFO)
                                        MC_RUNNER_MUTANTS(MC_RUNNER_MUTANT_INFO)
                                            MC_SCHEDULER_MUTANTS(MC_SCHEDULER_MUTANT_INFO)};
#undef MC_KERNEL_MUTANT_INFO
#undef MC_OUT_OF_BOUNDS_MUTANT_INFO
#undef MC_RUNNER_MUTANT_INFO
#undef MC_SCHEDULER_MUTANT_INFO

#define MC_COUNT_ONE(name, bug_class, schedule, description) +1
constexpr std::size_t kKernelCount = 0 MC_KERNEL_MUTANTS(MC_COUNT_ONE);
#undef MC_COUNT_ONE
#define MC_COUNT_ONE(name, bug_class, description) +1
constexpr std::size_t kRunnerCount = 0 MC_RUNNER_MUTANTS(MC_COUNT_ONE);
constexpr std::size_t kSchedulerCount = 0 MC_SCHEDULER_MUTANTS(MC_COUNT_ONE);
#undef MC_COUNT_ONE
static_assert(kKernelCount + kRunnerCount + kSchedulerCount == kCatalogue.size());

constexpr bool names_unique() {
  for (std::size_t i = 0; i < kCatalogue.size(); ++i)
    for (std::size_t j = i + 1; j < kCatalogue.size(); ++j)
      if (kCatalogue[i].name == kCatalogue[j].name) return false;
  return true;
}
static_assert(names_unique(), "a mutant name is the --mutant key: unique across both levels");

} // namespace

std::span<const MutantInfo> mutant_catalogue() {
  return kCatalogue;
}

const MutantInfo* find_mutant(std::string_view name) {
  for (const MutantInfo& info : kCatalogue)
    if (info.name == name) return &info;
  return nullptr;
}

std::string_view to_string(MutantLevel level) {
  switch (level) {
  case MutantLevel::kernel:
    return "kernel";
  case MutantLevel::runner:
    return "runner";
  case MutantLevel::scheduler:
    return "scheduler";
  }
  return "?";
}

std::span<const MutantInfo> runner_mutants() {
  return std::span<const MutantInfo>(kCatalogue).subspan(kKernelCount, kRunnerCount);
}

std::span<const MutantInfo> scheduler_mutants() {
  return std::span<const MutantInfo>(kCatalogue).subspan(kKernelCount + kRunnerCount);
}

std::string_view to_string(MutantSchedule schedule) {
  return schedule == MutantSchedule::racy ? "racy" : "deterministic";
}

std::span<const MutantInfo> kernel_mutants() {
  return std::span<const MutantInfo>(kCatalogue).first(kKernelCount);
}

std::string_view to_string(Mutant mutant) {
  const auto i = static_cast<std::size_t>(mutant);
  return i == 0 || i > kKernelCount ? std::string_view("none") : kCatalogue[i - 1].name;
}

std::optional<Mutant> find_kernel_mutant(std::string_view name) {
  return find_in_catalogue<Mutant>(kernel_mutants(), name);
}

} // namespace mc::gpu
