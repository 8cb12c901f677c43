// One benchmark case resident on the GPU: arenas, descriptors, every input set's block
// tables, request arrays and scratch, plus the timers. Used by bench/kernel_bench.cpp only.
#pragma once

#include "bench/kernel_bench_cases.h"
#include "gpu/device_memory.h"
#include "gpu/device_types.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

namespace mc::gpu {

// How a measurement's CUDA events see the launches between them.
enum class Timing {
  // The stream is idle when the start event is recorded, so the time includes the host's
  // submission of the launches (what one synchronous launch costs its caller).
  alone,
  // A latch kernel holds the stream while the events and launches are queued, then the host
  // releases it: the launches run back to back on the GPU (a busy stream, a CUDA graph), and
  // the time is the GPU's alone. The figure the targets are judged by.
  queued,
};

// Median over `iters` runs of `batch` calls of `run(i)` between two events, divided by `batch`,
// after warm-up. Throws model::EnvironmentError if a latch timed out (the host took over a
// second to queue one run), since that time would be the host's.
double median_us(cudaStream_t stream, int iters, int batch, Timing timing,
                 const std::function<void(int)>& run);

class BenchDevice {
public:
  explicit BenchDevice(const BenchCase& bench, FusedStart start = FusedStart::cooperative);
  ~BenchDevice();
  BenchDevice(const BenchDevice&) = delete;
  BenchDevice& operator=(const BenchDevice&) = delete;

  cudaStream_t stream() const { return stream_; }
  std::int64_t bytes_per_launch() const { return bytes_per_launch_; }
  std::int32_t num_tensors() const { return static_cast<std::int32_t>(tensors_.size()); }
  // The fused postprocess_align launch (no recording) of timed run `run`: over input set
  // run % sets, so that runs rotate through the sets.
  void launch_fused(int run);
  // The same launch with only the decider CTAs (valid for any input; slow when rows copy).
  void launch_fused_deciders_only(int run);
  // An empty kernel with the fused launch's grid: the floor of that shape.
  void launch_empty_grid();
  int programs() const { return programs_; }
  const DeviceBuffer& largest_arena() const;
  // The V1 flat copy list of input set `set`, and its batched-copy kernel launch (of run `run`).
  const std::vector<CopyTriple>& triples(std::size_t set) const { return triples_[set]; }
  void launch_batch_kernel(int run);

private:
  std::size_t set_of(int run) const { return static_cast<std::size_t>(run) % bench_.sets.size(); }
  void launch_fused_grid(int run, int programs);

  const BenchCase& bench_;
  cudaStream_t stream_ = nullptr;
  std::vector<DeviceBuffer> arenas_;
  std::vector<TensorDesc> tensors_;
  std::vector<UnitRef> units_;
  DeviceBuffer d_tensors_, d_units_;
  std::vector<std::vector<DeviceBuffer>> tables_; // [set][group]
  std::vector<DeviceBuffer> requests_;            // idx_mapping, num_accepted, state_idx, new
  std::vector<DeviceBuffer> scratch_;
  FusedParams params_;
  int programs_ = 0;
  std::int64_t bytes_per_launch_ = 0;
  std::vector<std::vector<CopyTriple>> triples_;
  std::vector<DeviceBuffer> d_triples_;
  std::vector<std::int64_t> triple_units_;
};

} // namespace mc::gpu
