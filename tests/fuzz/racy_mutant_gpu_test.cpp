// The racy kernel mutant (reset_races_other_programs, gpu/mutant.h) on cuda, over the grids
// of GenOptions::races() (label gpu; skipped without a device). Case i is the one `mambacheck
// export --focus races --seed SEED --max-size 100` writes as case i (seed SEED + i, size i),
// so the clean kernels' verdict printed here can be replayed with `mambacheck case`. Each case
// runs RUNS times with the mutant and RUNS times with the clean kernels, each run judged by
// the oracle as `mambacheck case --check` judges it (fuzz::run_case).
//
// Asserted: the clean kernels hold on every run (a race of theirs would show as a case that
// fails now and then), and the host backend, one fixed schedule, gives the same verdict on
// every run. Printed, not asserted: how many of the mutant's cuda runs failed per case, since
// the schedule decides it. Only postprocess_align cases run (the kind the mutant changes):
// MC_RACY_CASES of them (default 2) from case MC_RACY_FIRST on (default 0), MC_RACY_RUNS runs
// each (default 5), MC_RACY_SEED (default 1), MC_RACY_FOCUS (the generator preset, as
// `export --focus`; default races); scripts on the GPU machine raise them. MC_FUSED_START=ticket
// starts the fused kernel by tickets instead of cooperatively (gpu/cuda_backend.cpp).
#include "fuzz/gen_launch.h"
#include "fuzz/run_case.h"
#include "gpu/cuda_backend.h"
#include "gpu/host_backend.h"
#include "oracle/launch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

namespace mc::fuzz {
namespace {

constexpr gpu::Mutant kRacy = gpu::Mutant::reset_races_other_programs;
constexpr std::int64_t kSeedsMax = 400; // seeds tried for the postprocess_align cases asked for

std::int64_t env_or(const char* name, std::int64_t fallback, std::int64_t min, std::int64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  const std::int64_t value = std::strtoll(text, nullptr, 10);
  EXPECT_GE(value, min) << name;
  EXPECT_LE(value, max) << name;
  return value < min ? min : value > max ? max : value;
}

// Failing runs out of `runs` of `launch` with the kernels of `mutant` on `backend`.
int failing_runs(const model::LaunchCase& launch, const model::LaunchResult& expected,
                 gpu::Mutant mutant, bool cuda, int runs, std::string& first_failure) {
  int failed = 0;
  for (int run = 0; run < runs; ++run) {
    const CaseOutcome outcome =
        fuzz::run_case(launch, expected.clone(), [&](const model::LaunchCase& c) {
          return cuda ? gpu::run_launch_cuda(c, mutant) : gpu::run_launch_host(c, mutant);
        });
    if (!outcome.failed()) continue;
    ++failed;
    if (first_failure.empty()) first_failure = outcome.failure().value_or("");
  }
  return failed;
}

TEST(RacyMutantOnCuda, CleanKernelsHoldOnEveryRunAndTheMutantsCountIsPrinted) {
  if (!gpu::cuda_available()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  const std::int64_t first = env_or("MC_RACY_FIRST", 0, 0, 1000);
  const std::int64_t cases = env_or("MC_RACY_CASES", 2, 1, 100);
  const auto runs = static_cast<int>(env_or("MC_RACY_RUNS", 5, 1, 1000));
  const auto seed = static_cast<std::uint64_t>(env_or("MC_RACY_SEED", 1, 0, std::int64_t{1} << 40));
  const char* focus = std::getenv("MC_RACY_FOCUS");
  const std::optional<GenOptions> named = gen_options_named(focus == nullptr ? "races" : focus);
  ASSERT_TRUE(named.has_value()) << "MC_RACY_FOCUS: expected " << kGenFocusNames;
  GenOptions gen = *named;
  // Only postprocess_align cases: the only kind the mutant changes.
  std::int64_t found = 0;
  for (std::int64_t i = first; found < cases && i < first + kSeedsMax; ++i) {
    gen.random_size = static_cast<int>(i % 101);
    const LaunchSpec spec = random_launch_spec(seed + static_cast<std::uint64_t>(i), gen);
    if (spec.kind != model::LaunchKind::postprocess_align) continue;
    ++found;
    const model::LaunchCase launch = materialize(spec);
    const model::LaunchResult expected = oracle::run_launch(launch);
    std::string clean_failure;
    std::string racy_failure;
    std::string host_failure;
    const int clean = failing_runs(launch, expected, gpu::Mutant::none, true, runs, clean_failure);
    const int racy = failing_runs(launch, expected, kRacy, true, runs, racy_failure);
    const int host = failing_runs(launch, expected, kRacy, false, 2, host_failure);
    EXPECT_EQ(clean, 0) << "case " << i << ": " << clean_failure;
    EXPECT_TRUE(host == 0 || host == 2) << "case " << i << ": the host's one schedule varied";
    std::cout << fmt::format("racy case {} (seed {}, {}, {} rows, {} tensors): mutant failed {} "
                             "of {} cuda runs, clean {} of {}; host {}\n",
                             i, seed + static_cast<std::uint64_t>(i), model::to_string(spec.kind),
                             spec.num_reqs, launch.layout.tensors.size(), racy, runs, clean, runs,
                             host == 0 ? "holds" : "fails");
    if (!racy_failure.empty()) std::cout << "  first mutant failure: " << racy_failure << "\n";
  }
}

} // namespace
} // namespace mc::fuzz
