// The stamps of the synthetic forward (model/stamps.h): deterministic, prefix-determined,
// distinct per tensor and count, zero before position 0 and never zero for a token.
#include "model/stamps.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

namespace mc::model {
namespace {

TEST(Stamps, TemporalStateDependsOnlyOnThePrefix) {
  const std::vector<std::int32_t> a{5, 9, 2, 7};
  const std::vector<std::int32_t> b{5, 9, 2, 8};
  EXPECT_EQ(sequence_hash(std::span(a).first(3)), sequence_hash(std::span(b).first(3)));
  EXPECT_NE(sequence_hash(a), sequence_hash(b));
  std::array<std::byte, 13> x{}, y{}, z{};
  fill_temporal(x, sequence_hash(a), 0);
  fill_temporal(y, sequence_hash(a), 0);
  fill_temporal(z, sequence_hash(a), 1);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z); // another tensor, other bytes
  std::uint64_t w = temporal_word(sequence_hash(a), 0, 1);
  EXPECT_EQ(std::memcmp(x.data() + 8, &w, 5), 0); // byte b is byte b % 8 of word b / 8
}

TEST(Stamps, ConvStampIsZeroOnlyBeforeTheSequence) {
  EXPECT_EQ(conv_stamp(3, -1, 0, 0, 2), 0u);
  for (std::int32_t elem : {2, 4, 8})
    for (std::int64_t pos = 0; pos < 200; ++pos) {
      const std::uint64_t v = conv_stamp(static_cast<std::int32_t>(pos % 7), pos, 1, pos % 5, elem);
      EXPECT_NE(v, 0u);
      if (elem < 8) {
        EXPECT_LT(v, std::uint64_t{1} << (8 * elem));
      }
    }
  EXPECT_NE(conv_stamp(3, 10, 0, 0, 4), conv_stamp(4, 10, 0, 0, 4));
  EXPECT_NE(conv_stamp(3, 10, 0, 0, 4), conv_stamp(3, 11, 0, 0, 4));
  EXPECT_NE(conv_stamp(3, 10, 0, 0, 4), conv_stamp(3, 10, 1, 0, 4));
  EXPECT_NE(conv_stamp(3, 10, 0, 0, 4), conv_stamp(3, 10, 0, 1, 4));
}

} // namespace
} // namespace mc::model
