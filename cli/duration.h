// Durations on the command line: "90", "90s", "15m", "2h" (used by mutants and gate).
#pragma once

#include <string>
#include <string_view>

namespace mc::cli {

// Seconds; model::InputError naming `option` for anything else or a non-positive value.
double parse_duration_option(std::string_view option, const std::string& text);

} // namespace mc::cli
