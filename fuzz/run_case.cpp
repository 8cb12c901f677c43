#include "fuzz/run_case.h"

#include "model/errors.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <exception>

namespace mc::fuzz {

std::optional<std::string> CaseOutcome::failure() const {
  switch (status) {
  case CaseStatus::held:
    return std::nullopt;
  case CaseStatus::mismatch:
    MC_ASSERT(difference.has_value());
    return difference->message;
  case CaseStatus::oracle_rejected:
    return fmt::format("the oracle rejected the case: {}", error);
  case CaseStatus::backend_failed:
    return fmt::format("the backend failed: {}", error);
  }
  MC_ASSERT(false);
  return std::nullopt;
}

CaseOutcome run_case(const model::LaunchCase& launch, const LaunchRunner& backend,
                     BackendFindings findings) {
  model::LaunchResult oracle_result;
  try {
    oracle_result = oracle::run_launch(launch);
  } catch (const model::InputError& e) {
    return CaseOutcome{.status = CaseStatus::oracle_rejected, .error = e.what()};
  }
  return run_case(launch, std::move(oracle_result), backend, findings);
}

CaseOutcome run_case(const model::LaunchCase& launch, model::LaunchResult oracle_result,
                     const LaunchRunner& backend, BackendFindings findings) {
  CaseOutcome outcome{.oracle = std::move(oracle_result)};
  try {
    outcome.backend = backend ? backend(launch) : outcome.oracle.clone();
  } catch (const KernelError& e) {
    outcome.status = CaseStatus::backend_failed;
    outcome.error = e.what();
    return outcome;
  } catch (const std::exception& e) {
    if (findings == BackendFindings::kernel_errors) throw;
    outcome.status = CaseStatus::backend_failed;
    outcome.error = e.what();
    outcome.device_fault = dynamic_cast<const model::DeviceFault*>(&e) != nullptr;
    return outcome;
  }
  outcome.difference = compare_results(launch, outcome.oracle, outcome.backend);
  if (outcome.difference) outcome.status = CaseStatus::mismatch;
  return outcome;
}

CaseOutcome run_case(const LaunchSpec& spec, const LaunchRunner& backend,
                     BackendFindings findings) {
  return run_case(materialize(spec), backend, findings);
}

} // namespace mc::fuzz
