// run_case (fuzz/run_case.h): each status from one generated case, the oracle's result
// standing in for an empty backend, and which backend exceptions are findings.
#include "fuzz/run_case.h"

#include "model/errors.h"
#include "oracle/launch.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace mc::fuzz {
namespace {

// A generated case whose oracle result has a copy, so there are arena bytes to tamper with.
model::LaunchCase case_with_a_copy() {
  for (std::uint64_t seed = 1; seed < 200; ++seed) {
    model::LaunchCase launch = materialize(random_launch_spec(seed, {.random_size = 20}));
    if (!oracle::run_launch(launch).decisions.empty()) return launch;
  }
  ADD_FAILURE() << "no generated case with a copy decision";
  return {};
}

const LaunchRunner kOracle = [](const model::LaunchCase& c) { return oracle::run_launch(c); };

TEST(RunCase, HeldOnTheOracleItselfAndOnAnEmptyBackend) {
  const model::LaunchCase launch = case_with_a_copy();
  for (const LaunchRunner& backend : {kOracle, LaunchRunner{}}) {
    const CaseOutcome outcome = run_case(launch, backend);
    EXPECT_EQ(outcome.status, CaseStatus::held);
    EXPECT_FALSE(outcome.failed());
    EXPECT_FALSE(outcome.failure().has_value());
    EXPECT_FALSE(outcome.difference.has_value());
    EXPECT_EQ(outcome.backend.decisions.size(), outcome.oracle.decisions.size());
  }
}

TEST(RunCase, MismatchNamesTheDifference) {
  const model::LaunchCase launch = case_with_a_copy();
  const LaunchRunner tampering = [](const model::LaunchCase& c) {
    model::LaunchResult r = oracle::run_launch(c);
    const model::CopyDecision& d = r.decisions.front();
    const model::StateTensor& t = c.layout.tensors[static_cast<std::size_t>(d.tensor)];
    r.arenas[static_cast<std::size_t>(t.arena)].data()[t.block_offset_bytes(d.dst_block_id)] ^=
        std::byte{1};
    return r;
  };
  const CaseOutcome outcome = run_case(launch, tampering);
  ASSERT_EQ(outcome.status, CaseStatus::mismatch);
  ASSERT_TRUE(outcome.difference.has_value());
  EXPECT_EQ(outcome.difference->category, DifferenceCategory::arena);
  EXPECT_EQ(outcome.failure(), outcome.difference->message);
}

TEST(RunCase, RejectedByTheOracle) {
  model::LaunchCase launch = case_with_a_copy();
  launch.arenas.pop_back();
  const CaseOutcome outcome = run_case(launch, kOracle);
  EXPECT_EQ(outcome.status, CaseStatus::oracle_rejected);
  EXPECT_NE(outcome.error.find("arenas given"), std::string::npos) << outcome.error;
}

TEST(RunCase, BackendExceptionsThatAreFindings) {
  const model::LaunchCase launch = case_with_a_copy();
  const LaunchRunner environment = [](const model::LaunchCase&) -> model::LaunchResult {
    throw model::EnvironmentError("CUDA error: illegal address");
  };
  const LaunchRunner kernel = [](const model::LaunchCase&) -> model::LaunchResult {
    throw KernelError("boom");
  };
  // A campaign: every exception is a finding (a mutant's illegal address is a kill).
  CaseOutcome outcome = run_case(launch, environment);
  EXPECT_EQ(outcome.status, CaseStatus::backend_failed);
  EXPECT_EQ(outcome.failure(), "the backend failed: CUDA error: illegal address");
  // One case from the command line: only the kernels' own errors; the rest keep their exit.
  EXPECT_THROW(run_case(launch, environment, BackendFindings::kernel_errors),
               model::EnvironmentError);
  outcome = run_case(launch, kernel, BackendFindings::kernel_errors);
  EXPECT_EQ(outcome.status, CaseStatus::backend_failed);
  EXPECT_EQ(outcome.error, "boom");
}

} // namespace
} // namespace mc::fuzz
