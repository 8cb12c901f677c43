// The kernels' variant parameter. Every kernel body takes a `Mutant` template argument;
// the clean path is the instantiation with Mutant::none, so a broken variant selected with
// `--mutant NAME` (a later task) is a separate instantiation and costs the clean path nothing.
// A variant is added here and tested with `if constexpr (M == Mutant::...)` at the one
// place it changes (DESIGN.md, "Backends and kernels under test").
#pragma once

#include <cstdint>

namespace mc::gpu {

enum class Mutant : std::uint8_t {
  none, // the implementation under test, as specified in model/LAUNCH_KINDS.md
};

} // namespace mc::gpu
