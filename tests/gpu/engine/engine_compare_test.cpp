// Oracle engine vs the GPU-side engine runner on the host and cuda executors: V1 (precopy and
// batch_copy) and V2, align and all (with and without drafts), SD and DS, small pools so that
// preemption and reset_prefix_cache happen; decisions, arrays and every arena byte equal after
// every step.
#include "gpu/cuda_backend.h"
#include "gpu/mutant.h"
#include "harness/replay.h"
#include "harness/simulate.h"
#include "model/errors.h"
#include "model/presets.h"
#include "tests/harness/mutant_runs.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace mc::harness {
namespace {

struct RunCase {
  const char* preset;
  model::CacheMode mode;
  model::RunnerFlavour flavour;
  oracle::engine::V1CopyPath copy_path;
  model::ConvLayout conv_layout;
  std::int32_t num_spec;
  std::int64_t num_blocks;
  model::V2TableRows v2_tables = model::V2TableRows::batch_row;
  bool deferred_postprocess = false;
};

SimulationOptions make_options(const RunCase& rc, std::uint64_t seed,
                                   model::Backend executor) {
  const model::Preset& preset = model::find_preset(rc.preset);
  SimulationOptions o{.config = preset.config, .spec = preset.spec};
  o.config.mode = rc.mode;
  o.config.conv_layout = rc.conv_layout;
  o.config.num_spec_tokens = rc.num_spec;
  o.config.num_spec_blocks = rc.num_spec; // one speculative block per draft, in both modes
  o.spec.num_blocks = rc.num_blocks;
  o.num_steps = 4000;
  o.num_requests = 300;
  o.seed = seed;
  o.engine.runner.flavour = rc.flavour;
  o.engine.runner.v1_copy_path = rc.copy_path;
  o.engine.runner.v2_table_rows = rc.v2_tables;
  o.engine.runner.deferred_postprocess = rc.deferred_postprocess;
  o.engine.scheduler.reset_prefix_cache_per_million = 10'000;
  o.engine.scheduler.abort_per_million = 5'000;
  o.executor = executor;
  return o;
}

using model::CacheMode;
using model::ConvLayout;
using model::RunnerFlavour;
using model::V2TableRows;
using oracle::engine::V1CopyPath;

class EngineCompare : public ::testing::TestWithParam<RunCase> {};

TEST_P(EngineCompare, HostMatchesOracleEveryStep) {
  std::int64_t preemptions = 0;
  for (std::uint64_t seed : {1u, 2u}) {
    const SimulationResult r =
        simulate(make_options(GetParam(), seed, model::Backend::host));
    ASSERT_FALSE(r.finding.has_value()) << r.finding->message;
    ASSERT_FALSE(r.mismatch.has_value()) << r.mismatch->text;
    EXPECT_GT(r.steps_compared, 500);
    EXPECT_GT(r.bytes_compared, 0);
    preemptions += r.report.preemptions + r.report.forced_preemptions;
  }
  EXPECT_GT(preemptions, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, EngineCompare,
    ::testing::Values(RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::precopy, ConvLayout::SD, 2, 24},
                      RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::batch_copy, ConvLayout::SD, 2, 24},
                      RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::precopy_v1, ConvLayout::SD, 2, 24},
                      RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::precopy_v1, ConvLayout::DS, 2, 20},
                      RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::DS, 2, 24, V2TableRows::slot},
                      RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v2, V1CopyPath::precopy,
                              ConvLayout::SD, 1, 16, V2TableRows::slot, true},
                      RunCase{"tiny-linear", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::SD, 2, 12, V2TableRows::slot, true},
                      RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v1, V1CopyPath::precopy,
                              ConvLayout::DS, 2, 20},
                      RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::DS, 2, 24},
                      RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v2, V1CopyPath::precopy,
                              ConvLayout::SD, 1, 16},
                      RunCase{"tiny-mixed", CacheMode::align, RunnerFlavour::v1,
                              V1CopyPath::batch_copy, ConvLayout::DS, 0, 16},
                      RunCase{"tiny-mixed", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::SD, 0, 16},
                      RunCase{"tiny-linear", CacheMode::align, RunnerFlavour::v2,
                              V1CopyPath::precopy, ConvLayout::SD, 2, 12},
                      RunCase{"tiny-mamba2", CacheMode::all, RunnerFlavour::v1, V1CopyPath::precopy,
                              ConvLayout::SD, 0, 32},
                      RunCase{"tiny-gdn", CacheMode::all, RunnerFlavour::v2, V1CopyPath::precopy,
                              ConvLayout::DS, 0, 32},
                      RunCase{"tiny-mamba2", CacheMode::all, RunnerFlavour::v1, V1CopyPath::precopy,
                              ConvLayout::SD, 2, 40},
                      RunCase{"tiny-gdn", CacheMode::all, RunnerFlavour::v2, V1CopyPath::precopy,
                              ConvLayout::DS, 3, 40}));

// A postprocess deferred under pipeline parallelism, its tables gathered by batch row in another
// step's order, copies through another request's row (#55951): on both seeds the first such
// step reads a pad past that row's end (seed 1: step 3, column 10), the illegal access vLLM saw
// where the read lands unmapped. With per-slot tables nothing is found (the matrix above).
TEST(EngineDeferredPostprocess, BatchRowTablesCopyThroughAnotherRequestsRow) {
  for (std::uint64_t seed : {1u, 2u}) {
    const RunCase rc{"tiny-mamba2",
                     CacheMode::align,
                     RunnerFlavour::v2,
                     V1CopyPath::precopy,
                     ConvLayout::SD,
                     2,
                     24,
                     V2TableRows::batch_row,
                     true};
    const SimulationResult r = simulate(make_options(rc, seed, model::Backend::host));
    ASSERT_TRUE(r.finding.has_value()) << "seed " << seed;
    EXPECT_FALSE(r.mismatch.has_value()) << r.mismatch->text; // both sides did the same
    EXPECT_EQ(r.finding->kind, oracle::engine::FindingKind::launch_rejected) << r.finding->message;
    EXPECT_NE(r.finding->message.find("postprocess_align launch"), std::string::npos)
        << r.finding->message;
  }
}

// The same matrix on the cuda executor (device arenas for the run, the cuda kernels and the
// forward kernel), one seed: skipped without a device.
TEST_P(EngineCompare, CudaMatchesOracleEveryStep) {
  if (!gpu::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const SimulationResult r =
      simulate(make_options(GetParam(), 3, model::Backend::cuda));
  ASSERT_FALSE(r.finding.has_value()) << r.finding->message;
  ASSERT_FALSE(r.mismatch.has_value()) << r.mismatch->text;
  EXPECT_GT(r.steps_compared, 500);
  EXPECT_GT(r.bytes_compared, 0);
}

// The cuda executor compares where its bytes are (compare_kernel.cu, from the oracle's
// descriptions of what each block means): every runner mutant ends a run there at the step and
// with the text that the host executor and the oracle's bytes (`--reference`) give, clean runs
// compare as many bytes, and a whole comparison every 7 steps covers the sweep's path too.
TEST(DeviceCompare, EveryRunnerMutantEndsOnCudaAsOnTheHostsBytes) {
  if (!gpu::cuda_available()) GTEST_SKIP() << "no CUDA device";
  int killed = 0;
  for (SimulationOptions s : testing::runner_mutant_runs()) {
    s.arena_compare = {.whole_bytes_max = 0, .whole_every = 7};
    s.executor = model::Backend::cuda;
    const SimulationResult there = simulate(s);
    s.executor = model::Backend::host;
    s.engine.structures = oracle::engine::Structures::reference;
    const SimulationResult bytes = simulate(s);
    const std::string name{gpu::engine::to_string(s.runner_mutant)};
    ASSERT_NO_FATAL_FAILURE(testing::expect_same_outcome(name, there.mismatch, bytes.mismatch));
    ASSERT_EQ(there.finding.has_value(), bytes.finding.has_value()) << name;
    EXPECT_EQ(there.bytes_compared, bytes.bytes_compared) << name;
    killed += there.mismatch ? 1 : 0;
  }
  EXPECT_GT(killed, 30);
}

// The same for every kernel mutant whose bug shows on every run (not the racy ones, which on
// cuda show only under some interleavings), through a replay of one clean recorded run.
TEST(DeviceCompare, EveryKernelMutantEndsOnCudaAsOnTheHostsBytes) {
  if (!gpu::cuda_available()) GTEST_SKIP() << "no CUDA device";
  model::testing::TempDir dir;
  const std::filesystem::path trace = testing::record_clean_run(dir.path());
  int killed = 0;
  for (std::size_t m = 1; m <= gpu::kernel_mutants().size(); ++m) {
    const gpu::MutantInfo& info = gpu::kernel_mutants()[m - 1];
    if (!info.memory_safe || info.schedule == gpu::MutantSchedule::racy) continue;
    ReplayOptions o{.executor = model::Backend::cuda, .kernel_mutant = static_cast<gpu::Mutant>(m)};
    o.arena_compare = {.whole_bytes_max = 0, .whole_every = 5};
    const ReplayResult there = replay_file(trace, o);
    o.executor = model::Backend::host;
    o.structures = oracle::engine::Structures::reference;
    const ReplayResult bytes = replay_file(trace, o);
    const std::string name{info.name};
    ASSERT_NO_FATAL_FAILURE(testing::expect_same_outcome(name, there.mismatch, bytes.mismatch));
    EXPECT_EQ(there.bytes_compared, bytes.bytes_compared) << name;
    killed += there.mismatch ? 1 : 0;
  }
  EXPECT_GT(killed, 10);
}

} // namespace
} // namespace mc::harness
