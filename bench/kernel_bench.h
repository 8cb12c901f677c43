// `mambacheck bench`: CUDA-event timings of the kernels on presets modelled on real models,
// next to cudaMemcpyAsync (device to device, same total bytes) and a batched memcpy of the
// same copy list (cudaMemcpyBatchAsync). Without CUDA or a device it throws
// model::EnvironmentError (exit 3).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace mc::gpu {

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

} // namespace mc::gpu
