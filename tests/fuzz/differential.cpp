// Differential properties (see differential.h).
#include "differential.h"

#include "fuzz/run_case.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck/detail/Configuration.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

namespace mc::fuzz::testing {

void oracle_matches(const GenOptions& options, const std::string& backend_name,
                    const Backend& backend) {
  const LaunchSpec spec = *gen_launch_spec(options);
  RC_TAG(std::string(model::to_string(spec.kind)));
  const CaseOutcome outcome = run_case(spec, backend);
  switch (outcome.status) {
  case CaseStatus::held:
    return;
  case CaseStatus::oracle_rejected:
    RC_FAIL(fmt::format("the oracle rejected a generated case: {}\ncase: {}", outcome.error,
                        describe(spec)));
  case CaseStatus::backend_failed:
    RC_FAIL(fmt::format("the {} backend rejected a generated case: {}\ncase: {}", backend_name,
                        outcome.error, describe(spec)));
  case CaseStatus::mismatch:
    RC_FAIL(fmt::format("oracle vs {}: {} difference: {}\ncase: {}", backend_name,
                        to_string(outcome.difference->category), outcome.difference->message,
                        describe(spec)));
  }
}

void check_property(int cases, int max_size, const std::function<void()>& property) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  const char* env = std::getenv("RC_PARAMS");
  if (env == nullptr || std::strstr(env, "max_success") == nullptr) params.maxSuccess = cases;
  if (env == nullptr || std::strstr(env, "max_size") == nullptr) params.maxSize = max_size;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  const rc::detail::TestResult result =
      rc::detail::checkProperty(rc::detail::toProperty(property), metadata, params);
  std::ostringstream report;
  rc::detail::printResultMessage(result, report);
  if (result.template is<rc::detail::SuccessResult>()) {
    std::cout << report.str() << std::endl;
  } else {
    FAIL() << report.str();
  }
}

} // namespace mc::fuzz::testing
