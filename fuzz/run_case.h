// One launch case judged (DESIGN.md, "Kernel level"): the oracle runs it, the backend under
// test runs it, compare_results names the first difference. Every kernel-level check goes
// through here: the campaign and its shrinking, the differential properties, `mambacheck
// case`; they differ only in where the case comes from and what they do with the outcome.
#pragma once

#include "fuzz/compare.h"
#include "fuzz/gen_launch.h"
#include "model/launch.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace mc::fuzz {

// A backend under test: one launch case in, its result out.
using LaunchRunner = std::function<model::LaunchResult(const model::LaunchCase&)>;

// The kernels under test failed on this case (an external worker's `error:` answer): a
// finding like a wrong byte, whichever exceptions the caller treats as findings.
struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class CaseStatus : std::uint8_t {
  held,            // the backend's result equals the expected one exactly
  mismatch,        // it differs: `difference` names where
  oracle_rejected, // the oracle threw model::InputError: the case is invalid
  backend_failed,  // the backend threw an exception that is a finding (BackendFindings)
};

struct CaseOutcome {
  CaseStatus status = CaseStatus::held;
  model::LaunchResult oracle;           // empty when the oracle rejected the case
  model::LaunchResult backend;          // empty unless the backend returned
  std::optional<Difference> difference; // with status mismatch
  std::string error;                    // oracle_rejected, backend_failed: what was thrown
  bool device_fault = false; // backend_failed with model::DeviceFault: the device context is lost

  bool failed() const { return status != CaseStatus::held; }
  // One line naming the failure ("the backend failed: ...", the difference's message);
  // nothing when the case held.
  std::optional<std::string> failure() const;
};

// Which exceptions of the backend are findings (status backend_failed); others propagate.
enum class BackendFindings : std::uint8_t {
  // Every std::exception: in a campaign a CUDA error of a mutant's kernels is a kill.
  every_exception,
  // KernelError only: one case run from the command line, where an environment error stays
  // exit 3 and an input error exit 2.
  kernel_errors,
};

// Runs the oracle on `launch`, then `backend` (empty: the oracle's own result, cloned), and
// compares the two. The oracle rejecting the case is status oracle_rejected, not an exception.
CaseOutcome run_case(const model::LaunchCase& launch, const LaunchRunner& backend,
                     BackendFindings findings = BackendFindings::every_exception);

// The same with the oracle's result already computed (a caller that shows it before the
// backend runs); the oracle's model::InputError was the caller's to handle.
CaseOutcome run_case(const model::LaunchCase& launch, model::LaunchResult oracle_result,
                     const LaunchRunner& backend,
                     BackendFindings findings = BackendFindings::every_exception);

// A generated case: materialize(spec), then as above.
CaseOutcome run_case(const LaunchSpec& spec, const LaunchRunner& backend,
                     BackendFindings findings = BackendFindings::every_exception);

} // namespace mc::fuzz
