// The forward kernel body (gpu/engine/forward.cuh) writes the bytes the oracle expects: its
// temporal words, stored little-endian and cut to the natural bytes, equal fill_temporal.
// The stamp values themselves are pinned at compile time, so a change to their formulas (which
// both sides share through model/stamps.h) shows here and not only as unreadable checkpoints.
#include "gpu/engine/forward.cuh"
#include "model/stamps.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace mc::gpu::engine {
namespace {

static_assert(model::mix64(12345) == 0xf36cf1164265dd51ULL);
static_assert(model::extend_hash(model::kEmptySequenceHash, 7) == 0x5e0c25471f89e02eULL);
static_assert(model::temporal_word(0x1234567890ULL, 5, 3) == 0x29ae39c67757cb0bULL);
static_assert(model::conv_stamp(42, 17, 3, 9, 2) == 0xbfb0);
static_assert(model::conv_stamp(42, -1, 3, 9, 2) == 0);

TEST(ForwardBytes, TemporalBytesEqualFillTemporal) {
  for (std::size_t size : {1u, 7u, 8u, 13u, 64u, 1001u}) {
    std::vector<std::byte> expected(size);
    const model::TokenHash hash = model::mix64(size);
    model::fill_temporal(expected, hash, 5);
    std::vector<unsigned char> got(size);
    const ForwardOp op{.is_temporal = 1, .hash = hash};
    const ForwardTensor tensor{.natural_bytes = static_cast<std::int64_t>(size), .is_temporal = 1};
    forward_temporal(op, tensor, 5, 0, got.data(), 0, 1);
    ASSERT_EQ(std::memcmp(expected.data(), got.data(), size), 0) << size;
  }
}

} // namespace
} // namespace mc::gpu::engine
