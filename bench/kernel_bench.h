// `mambacheck bench`: CUDA-event timings of the kernels on presets modelled on real models,
// next to cudaMemcpyAsync (device to device, same total bytes) and a batched memcpy of the
// same copy list (cudaMemcpyBatchAsync). Without CUDA or a device it throws
// model::EnvironmentError (exit 3).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace mc::gpu {

struct BenchCase; // bench/kernel_bench_cases.h

// Input sets (block tables over disjoint blocks) a case rotates through at most.
inline constexpr std::int32_t kBenchSetsMax = 3;

struct BenchOptions {
  std::vector<std::string> presets;   // empty: a default set of production presets
  std::vector<std::int32_t> requests; // batch sizes; empty: 64 and 256
  std::int32_t iters = 50;            // timed runs per measurement (median reported)
  std::int32_t sets = kBenchSetsMax;  // input sets rotated between runs, 1..kBenchSetsMax
  bool ticket_start = false;          // the fused kernel's FusedStart::ticket (default:
                                      // cooperative where supported)
  std::string json_path;              // where to write the JSON report; empty: none
};

// Runs every measurement and prints the report to `out`; returns the process exit code.
int run_bench(const BenchOptions& options, std::ostream& out);

// The GPU this process would time on, for benchmarks that build their own cases.
struct BenchGpu {
  std::string name;
  std::int64_t memory_budget_bytes = 0; // what one case's arenas may take
  std::int64_t cache_bytes = 0;         // what input sets together should touch (4x the L2)
};
// nullopt in a build without CUDA or where no device is visible.
std::optional<BenchGpu> bench_gpu();

// This build's fused kernel and cudaMemcpyAsync of the same bytes on one case, timed as `run_bench`
// times them (median GPU time of `iters` launches queued behind a latch); the context is reset
// afterwards, so the device's memory is free for another process. Needs bench_gpu().
struct OwnKernelTimes {
  double fused_us = 0;
  double memcpy_us = 0;
  std::int64_t bytes_per_launch = 0;
};
OwnKernelTimes time_own_kernels(const BenchCase& bench, std::int32_t iters);

} // namespace mc::gpu
