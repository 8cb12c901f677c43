// The benchmark of a build without nvcc: nothing to time.
#include "bench/kernel_bench.h"
#include "model/errors.h"

namespace mc::gpu {

int run_bench(const BenchOptions&, std::ostream&) {
  throw model::EnvironmentError("built without CUDA: the benchmark needs the cuda backend");
}

std::optional<BenchGpu> bench_gpu() {
  return std::nullopt;
}

OwnKernelTimes time_own_kernels(const BenchCase&, std::int32_t) {
  throw model::EnvironmentError("built without CUDA: no kernels of this build to time");
}

} // namespace mc::gpu
