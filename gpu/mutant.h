// The kernels' variant parameter. Every kernel body takes a `Mutant` template argument;
// the clean path is the instantiation with Mutant::none, so a broken variant selected with
// `--mutant NAME` is a separate instantiation and costs the clean path nothing.
// A variant is added here (and to the catalogue in mutant.cpp) and tested with
// `if constexpr (M == Mutant::...)` at the one place it changes (DESIGN.md, "Backends and
// kernels under test"). Mutants of the runner's bookkeeping live in gpu/engine/runner_mutant.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace mc::gpu {

enum class Mutant : std::uint8_t {
  none, // the implementation under test, as specified in model/LAUNCH_KINDS.md
};

// One entry of a mutant catalogue: the name users pass to --mutant, the bug class of
// REFERENCE.md 5 it is modelled on ('A'..'H', or 'X' for one of our own), and what it breaks.
struct MutantInfo {
  std::string_view name;
  char bug_class = 'X';
  std::string_view description;
};

// Every kernel mutant except none, in enum order (entry i describes Mutant(i + 1)).
std::span<const MutantInfo> kernel_mutants();
std::string_view to_string(Mutant mutant); // "none" for the clean kernels
std::optional<Mutant> find_kernel_mutant(std::string_view name);

} // namespace mc::gpu
