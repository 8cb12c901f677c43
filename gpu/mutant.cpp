#include "gpu/mutant.h"

#include <array>

namespace mc::gpu {
namespace {

// Entry i describes Mutant(i + 1): both come from MC_KERNEL_MUTANTS in the same order.
constexpr std::array kKernelMutants{
#define MC_MUTANT_INFO(name, bug_class, description) MutantInfo{#name, bug_class, description},
    MC_KERNEL_MUTANTS(MC_MUTANT_INFO)
#undef MC_MUTANT_INFO
};

} // namespace

std::span<const MutantInfo> kernel_mutants() { return kKernelMutants; }

std::string_view to_string(Mutant mutant) {
  const auto i = static_cast<std::size_t>(mutant);
  return i == 0 || i > kKernelMutants.size() ? std::string_view("none") : kKernelMutants[i - 1].name;
}

std::optional<Mutant> find_kernel_mutant(std::string_view name) {
  if (name == "none") return Mutant::none;
  for (std::size_t i = 0; i < kKernelMutants.size(); ++i)
    if (kKernelMutants[i].name == name) return static_cast<Mutant>(i + 1);
  return std::nullopt;
}

} // namespace mc::gpu
