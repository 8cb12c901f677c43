// Oracle vs host backend on generated cases of every kind and size class (label prop).
// The host backend runs the CUDA kernels' own program bodies on the CPU, so these
// properties check the kernels' decisions and byte movement against the oracle in CI.
#include "differential.h"

#include "gpu/host_backend.h"

#include <gtest/gtest.h>

namespace mc::fuzz {
namespace {

const testing::Backend kHost = [](const model::LaunchCase& c) { return gpu::run_launch_host(c); };

GenOptions only(model::LaunchKind kind) {
  GenOptions o = GenOptions::host_default();
  o.kinds = {kind};
  o.weights.big_offset = 0; // BigOffsets below covers them, a few at a time
  return o;
}

void check_kind(model::LaunchKind kind, int cases) {
  testing::check_property(cases, 100,
                          [kind] { testing::oracle_matches(only(kind), "host", kHost); });
}

TEST(OracleVsHost, Postprocess) {
  check_kind(model::LaunchKind::postprocess, 1000);
}
TEST(OracleVsHost, PostprocessAlign) {
  check_kind(model::LaunchKind::postprocess_align, 1000);
}
TEST(OracleVsHost, Precopy) {
  check_kind(model::LaunchKind::precopy, 1000);
}
TEST(OracleVsHost, PreprocessAlign) {
  check_kind(model::LaunchKind::preprocess_align, 1000);
}
TEST(OracleVsHost, BatchCopy) {
  check_kind(model::LaunchKind::batch_copy, 1000);
}

// Every kind and class mixed, as a campaign would draw them.
TEST(OracleVsHost, EveryKindMixed) {
  GenOptions o = GenOptions::host_default();
  o.weights.big_offset = 0;
  testing::check_property(1000, 100, [o] { testing::oracle_matches(o, "host", kHost); });
}

// Arenas > 4 GiB whose used blocks sit past byte 2^32 (class B); sparse, so few cases.
TEST(OracleVsHost, BigOffsets) {
  testing::check_property(
      4, 100, [] { testing::oracle_matches(GenOptions::big_offsets(), "host", kHost); });
}

} // namespace
} // namespace mc::fuzz
