// Launch cases and results for the case-file tests: small, deterministic, every byte known.
//
// make_case fills every array a launch kind reads (LAUNCH_KINDS.md) with values that make
// sense for it, the block tables with distinct blocks per row (and a stride gap), and the
// arenas with poison plus a seeded pattern. precopy_result computes a precopy result by
// hand from LAUNCH_KINDS.md, so that the Python example has a true decision to reproduce;
// it is test data, not an oracle.
#pragma once

#include "model/launch.h"

#include <cstdint>
#include <string_view>

namespace mc::model::testing {

LaunchCase make_case(std::string_view preset, ConvLayout conv_layout, LaunchKind kind,
                     std::uint32_t seed);

// A result with every array filled, some decisions, changed arena bytes; `status` as asked.
LaunchResult make_result(const LaunchCase& launch_case, LaunchStatus status, std::uint32_t seed);

// The result of a precopy case (LAUNCH_KINDS.md "precopy", "The copy of one state").
LaunchResult precopy_result(const LaunchCase& launch_case);

} // namespace mc::model::testing
