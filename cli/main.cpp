// mambacheck: the command-line entry point. Subcommands live in their own files.
#include "cli/commands.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>

namespace mc::cli {
std::vector<AddCommand>& command_registry() {
  static std::vector<AddCommand> registry;
  return registry;
}
} // namespace mc::cli

int main(int argc, char** argv) {
  CLI::App app{"mambacheck: verifies the state cache of hybrid (Mamba / linear-attention) "
               "models: a CPU oracle, CUDA kernels, and property-based fuzzing between them"};
  app.set_version_flag("--version", std::string("mambacheck ") + MC_VERSION);
  app.require_subcommand(1);
  mc::cli::Action action;
  for (const mc::cli::AddCommand add : mc::cli::command_registry())
    add(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit 2 (CLI11's own message would add a second line).
    std::fprintf(stderr, "mambacheck: usage error: %s (see --help)\n", e.what());
    return mc::cli::kExitBadInput;
  }
  mc::model::install_interrupt_handlers();
  try {
    return action();
  } catch (const mc::model::InputError& e) {
    std::fprintf(stderr, "mambacheck: error: %s\n", e.what());
    return mc::cli::kExitBadInput;
  } catch (const mc::model::EnvironmentError& e) {
    std::fprintf(stderr, "mambacheck: unavailable: %s\n", e.what());
    return mc::cli::kExitEnvironment;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be created, read or written.
    std::fprintf(stderr, "mambacheck: error: %s\n", e.what());
    return mc::cli::kExitBadInput;
  } catch (const std::exception& e) {
    // Last resort: one line, never an abort. Anything that reaches here is the machine's
    // (memory, a system call) or ours; either way the user gets a line to report.
    std::fprintf(stderr, "mambacheck: unavailable: %s\n", e.what());
    return mc::cli::kExitEnvironment;
  }
}
