// --require-coverage and the coverage table (coverage_option.h).
#include "cli/coverage_option.h"

#include <fmt/format.h>

#include <iostream>

namespace mc::cli {

void add_require_coverage_option(CLI::App& cmd, std::vector<std::string>& values) {
  cmd.add_option("--require-coverage", values,
                 "Fail (exit 1) unless the run reached these features (comma list, or all); "
                 "the coverage table lists them")
      ->delimiter(',');
}

model::CoverageRequirement coverage_requirement(const std::vector<std::string>& values,
                                                std::span<const model::CoverageLevel> levels) {
  model::CoverageRequirement r = model::parse_coverage_requirement(values);
  model::check_requirement_levels(r, levels);
  return r;
}

std::vector<std::string> report_coverage(const model::CoverageRequirement& required,
                                         const model::Coverage& coverage) {
  std::cout << model::coverage_table(coverage);
  std::vector<std::string> missing = model::missing_coverage(required, coverage);
  if (!missing.empty())
    std::cout << fmt::format("COVERAGE: the {} level never reached required feature{}: {}\n",
                             model::to_string(coverage.level), missing.size() == 1 ? "" : "s",
                             fmt::join(missing, ", "));
  return missing;
}

} // namespace mc::cli
