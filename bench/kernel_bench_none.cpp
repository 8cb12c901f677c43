// The benchmark of a build without nvcc: nothing to time.
#include "bench/kernel_bench.h"
#include "model/errors.h"

namespace mc::gpu {

int run_bench(const BenchOptions&, std::ostream&) {
  throw model::EnvironmentError("built without CUDA: the benchmark needs the cuda backend");
}

} // namespace mc::gpu
