// The device-callable stamp mirrors (gpu/engine/stamps_hd.h) give the same values and bytes
// as model/stamps.h, over random hashes, tokens, positions, tensors and element sizes.
#include "gpu/engine/stamps_hd.h"
#include "model/stamps.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

namespace mc::gpu::engine {
namespace {

TEST(StampsHd, SameValuesAsModelStamps) {
  std::uint64_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = model::mix64(x + 1);
    const auto token = static_cast<std::int32_t>(x >> 40) - (1 << 22);
    const auto position = static_cast<std::int64_t>(x % 5000) - 3;
    const auto tensor = static_cast<std::int32_t>(x % 97);
    const auto channel = static_cast<std::int64_t>((x >> 8) % 4096);
    const std::int32_t elem = std::array{2, 4, 8}[x % 3];
    ASSERT_EQ(mix64_hd(x), model::mix64(x));
    ASSERT_EQ(extend_hash_hd(x, token), model::extend_hash(x, token));
    ASSERT_EQ(temporal_word_hd(x, tensor, channel), model::temporal_word(x, tensor, channel));
    ASSERT_EQ(conv_stamp_hd(token, position, tensor, channel, elem),
              model::conv_stamp(token, position, tensor, channel, elem));
  }
}

TEST(StampsHd, TemporalBytesEqualFillTemporal) {
  for (std::size_t size : {1u, 7u, 8u, 13u, 64u, 1001u}) {
    std::vector<std::byte> expected(size);
    const model::TokenHash hash = model::mix64(size);
    model::fill_temporal(expected, hash, 5);
    std::vector<unsigned char> got(size);
    for (std::size_t w = 0; w * 8 < size; ++w) {
      const std::size_t left = size - 8 * w;
      store_le(got.data() + 8 * w, temporal_word_hd(hash, 5, static_cast<std::int64_t>(w)),
               static_cast<std::int32_t>(left < 8 ? left : 8));
    }
    ASSERT_EQ(std::memcmp(expected.data(), got.data(), size), 0) << size;
  }
}

} // namespace
} // namespace mc::gpu::engine
