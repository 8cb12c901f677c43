// The subcommands of `mambacheck`, one file each. Each registers itself on the
// app and, when chosen, leaves the function to run in `action` (exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace mc::cli {

using Action = std::function<int()>;

// Exit codes (DESIGN.md, "CLI contract").
inline constexpr int kExitOk = 0;
inline constexpr int kExitMismatch = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitEnvironment = 3;

void add_layout_command(CLI::App& app, Action& action);

} // namespace mc::cli
