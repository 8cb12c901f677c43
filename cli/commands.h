// The subcommands of `mambacheck`, one file each. A file registers its
// subcommand with MC_REGISTER_COMMAND; when chosen, the subcommand leaves the
// function to run in `action` (it returns the exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace mc::cli {

using Action = std::function<int()>;
using AddCommand = void (*)(CLI::App& app, Action& action);

// Exit codes (DESIGN.md, "CLI contract").
inline constexpr int kExitOk = 0;
inline constexpr int kExitMismatch = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitEnvironment = 3;

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
