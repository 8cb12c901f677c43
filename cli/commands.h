// The subcommands of `mambacheck`, one file each. A file registers its
// subcommand with MC_REGISTER_COMMAND; when chosen, the subcommand leaves the
// function to run in `action` (it returns the exit code).
#pragma once

#include "model/errors.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace mc::cli {

using Action = std::function<int()>;
using AddCommand = void (*)(CLI::App& app, Action& action);

// Exit codes (DESIGN.md, "CLI contract").
inline constexpr int kExitOk = 0;
inline constexpr int kExitMismatch = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitEnvironment = 3;

// An option's value outside lo..hi is bad input, one line: "OPTION: expected LO..HI, got VALUE";
// check_option_within words it as some commands do, "OPTION must be in LO..HI, got VALUE".
inline void check_option_range(std::string_view option, std::int64_t value, std::int64_t lo,
                               std::int64_t hi) {
  if (value < lo || value > hi)
    model::fail_input("{}: expected {}..{}, got {}", option, lo, hi, value);
}
inline void check_option_within(std::string_view option, std::int64_t value, std::int64_t lo,
                                std::int64_t hi) {
  if (value < lo || value > hi)
    model::fail_input("{} must be in {}..{}, got {}", option, lo, hi, value);
}

// Subcommands in registration order (static initialisation of the cli/ files).
std::vector<AddCommand>& command_registry();
inline bool register_command(AddCommand add) {
  command_registry().push_back(add);
  return true;
}

} // namespace mc::cli

#define MC_REGISTER_COMMAND(add_function)                                                          \
  [[maybe_unused]] static const bool mc_registered_##add_function =                                \
      ::mc::cli::register_command(&add_function)
