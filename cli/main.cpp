// mambacheck: the command-line entry point. Subcommands live in their own files.
#include "backends/external_backend.h"
#include "cli/commands.h"
#include "gpu/cuda_backend.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

namespace mc::cli {
std::vector<AddCommand>& command_registry() {
  static std::vector<AddCommand> registry;
  return registry;
}
} // namespace mc::cli

namespace {

// CLI11 converts "-1" to a huge unsigned value and saturates or wraps integers past their type,
// so a mistyped seed or count would start a different campaign instead of an error. Every
// numeric option of every subcommand is checked as text first: counts, sizes, indices and seeds
// are whole numbers from 0 up that fit the option's type (a signed option stops at 2^63 - 1,
// where CLI11 would saturate instead of refusing); every real number (a timeout, a step length)
// is finite and positive.
std::string check_whole_number(const std::string& text, std::uint64_t max) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return "expected a whole number from 0 up, got '" + text + "'";
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || value > max)
    return fmt::format("'{}' is out of range: at most {}", text, max);
  return {};
}

std::string check_positive_real(std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    return "expected a number, got '" + text + "'";
  if (errno == ERANGE || !std::isfinite(value) || value <= 0.0)
    return "expected a finite number above 0, got '" + text + "'";
  return {};
}

void check_numeric_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type == "INT" || type == "UINT") {
      const std::uint64_t max = type == "INT" ? std::uint64_t{INT64_MAX} : UINT64_MAX;
      option->check(
          CLI::Validator([max](std::string& text) { return check_whole_number(text, max); }, ""));
    } else if (type == "FLOAT")
      option->check(CLI::Validator(check_positive_real, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    check_numeric_options(*sub);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"mambacheck: verifies the state cache of hybrid (Mamba / linear-attention) "
               "models: a CPU oracle, CUDA kernels, and property-based fuzzing between them"};
  app.set_version_flag("--version", std::string("mambacheck ") + MC_VERSION);
  app.require_subcommand(1);
  mc::cli::Action action;
  for (const mc::cli::AddCommand add : mc::cli::command_registry())
    add(app, action);
  check_numeric_options(app);
  // CLI11 reads an empty value as the option's default; an empty argument is always a mistake
  // (an unset shell variable), so it is refused before it can start a default run.
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] == '\0') {
      std::fprintf(stderr, "mambacheck: usage error: argument %d is empty%s%s (see --help)\n", i,
                   i > 1 ? ", after " : "", i > 1 ? argv[i - 1] : "");
      return mc::cli::kExitBadInput;
    }
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
    mc::gpu::check_cuda_environment();
    return action();
  } catch (const mc::model::InputError& e) {
    std::fprintf(stderr, "mambacheck: error: %s\n", e.what());
    return mc::cli::kExitBadInput;
  } catch (const mc::model::EnvironmentError& e) {
    std::fprintf(stderr, "mambacheck: unavailable: %s\n", e.what());
    return mc::cli::kExitEnvironment;
  } catch (const mc::backends::ExternalWorkerFailure& failure) { // a worker that cannot be used
    std::fprintf(stderr, "mambacheck: unavailable: %s\n", failure.message.c_str());
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
