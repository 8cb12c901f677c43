// --require-coverage, shared by fuzz, gate, replay and run: features of the reference design
// (model/coverage.h) that the run must have reached, or `all` of them for the levels it runs.
// Unknown names are rejected before anything runs (exit 2); a run that held but never reached a
// required feature fails (exit 1) and names what it missed.
#pragma once

#include "model/coverage.h"

#include <CLI/CLI.hpp>

#include <span>
#include <string>
#include <vector>

namespace mc::cli {

void add_require_coverage_option(CLI::App& cmd, std::vector<std::string>& values);

// Parses and checks the values against the levels the command runs (InputError otherwise).
model::CoverageRequirement coverage_requirement(const std::vector<std::string>& values,
                                                std::span<const model::CoverageLevel> levels);

// Prints the coverage table; when `required` names features `coverage` never reached, prints
// one line naming them and returns them (else nothing).
std::vector<std::string> report_coverage(const model::CoverageRequirement& required,
                                         const model::Coverage& coverage);

} // namespace mc::cli
