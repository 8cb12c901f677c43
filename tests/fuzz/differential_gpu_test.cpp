// Oracle vs cuda backend (label gpu): the same properties at production scale, where
// races and 64-bit addressing show. Skipped (never passed) without a CUDA device.
#include "differential.h"

#include "gpu/cuda_backend.h"

#include <gtest/gtest.h>

namespace mc::fuzz {
namespace {

const testing::Backend kCuda = [](const model::LaunchCase& c) { return gpu::run_launch_cuda(c); };

class OracleVsCuda : public ::testing::Test {
protected:
  void SetUp() override {
    if (!gpu::cuda_available()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  }
};

TEST_F(OracleVsCuda, EveryKindMixed) {
  GenOptions o = GenOptions::host_default();
  o.weights.big_offset = 0;
  testing::check_property(2000, 100, [o] { testing::oracle_matches(o, "cuda", kCuda); });
}

// Grids of >= 64 layers x >= 2 states x >= 256 requests.
TEST_F(OracleVsCuda, ProductionGrids) {
  testing::check_property(40, 100,
                          [] { testing::oracle_matches(GenOptions::gpu_grid(), "cuda", kCuda); });
}

// An arena > 4 GiB on the device with blocks past byte 2^32.
TEST_F(OracleVsCuda, BigOffsets) {
  testing::check_property(
      4, 100, [] { testing::oracle_matches(GenOptions::big_offsets(), "cuda", kCuda); });
}

} // namespace
} // namespace mc::fuzz
