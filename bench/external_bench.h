// `mambacheck bench --external COMMAND [--baseline COMMAND] [--max-slowdown X]`: how fast
// kernels written elsewhere copy state, next to the kernels they would replace.
//
// The cases are `bench`'s (bench/kernel_bench_cases.h): a production preset at a batch size,
// every crossing row saving its running state to the next column with a token bias, the
// others deciding and copying nothing, input sets over disjoint blocks rotated between timed
// launches. Each is written as case directories of the V2 postprocess launch (one per input
// set) and timed by the worker itself (the adapter's bench protocol: CUDA events around each
// launch, queued behind a sleep kernel so the time is the GPU's, or the wall clock for host
// kernels), the per-request arrays restored between launches outside the timed span. Where
// this build has CUDA and a device, the same case is timed on this build's fused kernel and
// as one cudaMemcpyAsync of the same bytes, before the workers run (its context is reset, so
// the device's memory is theirs).
//
// The ratio is the candidate's median over the baseline's; a case above --max-slowdown is a
// regression and the command exits 1. A worker that does not serve the bench protocol, or
// covers neither V2 postprocess convention, cannot be judged: ExternalWorkerFailure (exit 3).
#pragma once

#include "bench/kernel_bench.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace mc::bench {

// Arena bytes one case may take where no GPU is visible to this process (host kernels, whose
// arenas are ordinary memory of the worker).
inline constexpr std::int64_t kExternalBenchHostArenaBytes = std::int64_t{1} << 30;
// On a GPU: a third of what `bench` would give one case (the adapter keeps a copy of every
// arena to find what a launch changed), at most this much, enough for launches that move
// gigabytes (mamba2-2.7b: 170 MB a block) without writing and reading case files that large.
inline constexpr std::int64_t kExternalBenchGpuArenaBytesMax = std::int64_t{8} << 30;

struct ExternalBenchOptions {
  std::string command;                // the kernels under test, a worker command
  std::string baseline_command;       // the kernels they replace; empty: none
  std::optional<double> max_slowdown; // candidate / baseline above it fails; needs a baseline
  std::vector<std::string> presets;   // empty: bench's default production presets
  std::vector<std::int32_t> requests; // batch sizes; empty: 64 and 256
  std::int32_t iters = 50;
  std::int32_t sets = gpu::kBenchSetsMax;
  double timeout_seconds = 0;     // each worker request
  std::filesystem::path work_dir; // case directories and the workers' logs
};

// The kernels under test failed a timed launch (raised, wrote outside their buffers, died or
// hung): they are wrong before they are slow. The message names the case and the worker.
struct ExternalBenchKernelFailure {
  std::string message;
};

struct ExternalBenchResult {
  nlohmann::json report;   // every case's times and ratios, the regressions
  bool regression = false; // a case above --max-slowdown
};

// Runs every case on the workers, printing one line each to `out` as it is done.
ExternalBenchResult run_external_bench(const ExternalBenchOptions& options, std::ostream& out);

} // namespace mc::bench
