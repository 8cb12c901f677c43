// Each kernel mutant is killed by the host kernel-level campaign at a fixed seed within a
// bounded number of cases, with a shrunk counterexample of at most 3 requests; the clean
// kernels hold on the same cases. Sizes are kept small so the whole suite stays fast under
// ASan; `mambacheck mutants` runs the full-size version.
#include "fuzz/mutants/mutants.h"
#include "gpu/host_backend.h"
#include "gpu/mutant.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace mc::fuzz {
namespace {

constexpr std::uint64_t kSeed = 1;
constexpr std::int64_t kCasesMax = 400;

// Each test writes its counterexamples into its own fresh directory: ctest runs the mutants in
// parallel, and a shared directory removed by one test pulled the files from under another.
MutantRunOptions options(const std::filesystem::path& dir) {
  MutantRunOptions o;
  o.seed = kSeed;
  o.cases_max = kCasesMax;
  o.seconds_max = 120.0; // a safety net: the case bound decides
  o.max_size = 60; // sizes 50..60 reach the grid and big-offset classes
  o.backend_name = "host";
  o.backend = [](const model::LaunchCase& c, gpu::Mutant m) { return gpu::run_launch_host(c, m); };
  o.out_dir = dir;
  // Candidates alone bound the shrink: a time bound makes the counterexample's size depend on
  // how loaded the machine is (three mutants stopped above 3 requests at 20 s under ASan).
  o.shrink = ShrinkLimits{.candidates_max = 1000, .seconds_max = 0};
  return o;
}

class KernelMutantKill : public testing::TestWithParam<std::size_t> {};

TEST_P(KernelMutantKill, KilledWithASmallCounterexample) {
  const auto mutant = static_cast<gpu::Mutant>(GetParam() + 1);
  const model::testing::TempDir dir;
  MutantRunOptions o = options(dir.path());
  const bool big = mutant == gpu::Mutant::block_offset_32bit;
  if (big) {
    // Only big-offset cases (a sparse 5 GiB arena each) show it, and shrinking them dominates
    // the suite's time under ASan: draw only those, shrink little (`mambacheck mutants`
    // shrinks it fully, to 3 requests at seed 1).
    o.gen = GenOptions::big_offsets();
    o.shrink.candidates_max = 10;
  }
  const MutantOutcome out = run_kernel_mutant(o, mutant);
  ASSERT_TRUE(out.killed) << out.name << " survived " << out.cases << " cases";
  EXPECT_EQ(out.name, gpu::to_string(mutant));
  EXPECT_LE(out.cases, kCasesMax);
  EXPECT_EQ(out.cx_steps, 1); // kernel level: one launch
  EXPECT_GE(out.cx_requests, 1);
  // An out-of-bounds mutant is first killed by a crash, whose row must reach far enough past
  // the table to fault: that takes a few more rows.
  const bool out_of_bounds = !gpu::kernel_mutants()[GetParam()].memory_safe;
  if (!big) {
    EXPECT_LE(out.cx_requests, out_of_bounds ? 8 : 3) << out.name << ": " << out.failure;
  }
  EXPECT_FALSE(out.failure.empty());
  EXPECT_NE(out.reproduce.find("--mutant " + out.name), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AllKernelMutants, KernelMutantKill,
                         testing::Range<std::size_t>(0, gpu::kernel_mutants().size()),
                         [](const testing::TestParamInfo<std::size_t>& param) {
                           return std::string(gpu::kernel_mutants()[param.param].name);
                         });

// The same campaign on the clean kernels finds nothing: a kill above is the mutant's doing.
TEST(KernelMutantKill, CleanKernelsHoldOnTheSameCases) {
  const model::testing::TempDir dir;
  const MutantRunOptions o = options(dir.path());
  const CampaignOptions c{.seed = o.seed,
                          .cases_max = 120,
                          .max_size = o.max_size,
                          .backend_name = "host",
                          .out_dir = o.out_dir};
  const CampaignReport r = run_kernel_campaign(
      c, {.backend = [](const model::LaunchCase& launch) { return gpu::run_launch_host(launch); }});
  EXPECT_EQ(r.cases, 120);
  EXPECT_TRUE(r.findings.empty()) << r.findings.front().failure;
}

TEST(KernelMutantJobs, SelectionKeepsOrderAndRejectsUnknownNames) {
  const std::vector<MutantJob> all = kernel_mutant_jobs();
  ASSERT_EQ(all.size(), gpu::kernel_mutants().size());
  const std::vector<MutantJob> two =
      select_jobs(all, {"batch_copy_drops_last", "precopy_guard_by_address"});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].name, "batch_copy_drops_last");
  EXPECT_EQ(two[1].level, "kernel");
  EXPECT_THROW(select_jobs(all, {"nope"}), model::InputError);
}

TEST(KernelMutantJobs, OutOfBoundsMutantsAreMarkedAndRun) {
  for (const MutantJob& job : kernel_mutant_jobs()) {
    const gpu::MutantInfo* info = gpu::find_mutant(job.name);
    ASSERT_NE(info, nullptr) << job.name;
    EXPECT_EQ(job.memory_safe, info->memory_safe) << job.name;
  }
  EXPECT_FALSE(kernel_mutant_job(*gpu::find_mutant("table_row_from_slot")).memory_safe);
}

TEST(KernelMutantTable, MedianOfKilledOnly) {
  std::vector<MutantOutcome> outcomes(3);
  outcomes[0].killed = true;
  outcomes[0].seconds_to_kill = 0.5;
  outcomes[1].killed = true;
  outcomes[1].seconds_to_kill = 0.1;
  outcomes[2].seconds_to_kill = 99.0; // survived: not counted
  EXPECT_DOUBLE_EQ(median_seconds_to_kill(outcomes), 0.3);
  EXPECT_NE(format_table(outcomes).find("2 of 3 killed"), std::string::npos);
}

} // namespace
} // namespace mc::fuzz
