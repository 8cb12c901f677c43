// One `--mutant NAME` across commands: any entry of the mutant catalogue (gpu/mutant.h), named as
// `mambacheck mutants --list` prints it, its level (kernel, runner or scheduler) found from the
// name. Repeatable where a command runs two levels at once (replay: a kernel mutant under a
// runner mutant). The spellings that named the level, --kernel-mutant and --runner-mutant, stay
// as hidden aliases.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mc::cli {

// The mutants a command runs, by level; "none" where none.
struct MutantNames {
  std::string kernel = "none";
  std::string runner = "none";
  std::string scheduler = "none";
};

// --mutant (repeatable) into `names`; the hidden aliases into `kernel` and `runner`.
void add_mutant_option(CLI::App& cmd, std::vector<std::string>& names, std::string& kernel,
                       std::string& runner, const std::string& help);

// `names` sorted by level over `legacy`; an unknown name, or two of one level, is an InputError.
MutantNames mutants_by_level(const std::vector<std::string>& names, MutantNames legacy);

} // namespace mc::cli
