// The stamps of the synthetic forward (model/stamps.h): deterministic, prefix-determined,
// distinct per tensor and count, zero before position 0 and never zero for a token.
#include "model/stamps.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// The per-channel and per-word functions are bijections of the index for a fixed seed: the
// 64-bit values of one conv row, or of one temporal state, never repeat.
TEST(Stamps, ChannelsOfARowAndWordsOfAStateAreDistinct) {
  for (std::int64_t pos = 0; pos < 64; ++pos) {
    const std::uint64_t seed = conv_row_seed(static_cast<std::int32_t>(pos * 31 % 11), pos, 2);
    std::vector<std::uint64_t> row;
    for (std::int64_t ch = 0; ch < 4096; ++ch) {
      row.push_back(conv_channel_value(seed, ch, 8));
      EXPECT_EQ(conv_stamp(static_cast<std::int32_t>(pos * 31 % 11), pos, 2, ch, 8), row.back());
    }
    std::sort(row.begin(), row.end());
    EXPECT_EQ(std::adjacent_find(row.begin(), row.end()), row.end()) << pos;
  }
  const std::uint64_t seed = temporal_seed(sequence_hash(std::vector<std::int32_t>{1, 2, 3}), 5);
  std::vector<std::uint64_t> words;
  for (std::int64_t w = 0; w < 1 << 16; ++w)
    words.push_back(temporal_value(seed, w));
  std::sort(words.begin(), words.end());
  EXPECT_EQ(std::adjacent_find(words.begin(), words.end()), words.end());
}

// The 2-byte cut still tells neighbouring positions, tokens and channels apart: of 4096
// (position, channel) pairs, the stamp equals the one a position or a token later in at most
// a few cases (1/65536 each by chance), never in a run.
TEST(Stamps, TwoByteStampsTellNeighboursApart) {
  int same_next_position = 0;
  int same_next_token = 0;
  for (std::int64_t pos = 0; pos < 512; ++pos)
    for (std::int64_t ch = 0; ch < 8; ++ch) {
      const std::uint64_t v = conv_stamp(7, pos, 0, ch, 2);
      same_next_position += v == conv_stamp(7, pos + 1, 0, ch, 2);
      same_next_token += v == conv_stamp(8, pos, 0, ch, 2);
    }
  EXPECT_LE(same_next_position, 2);
  EXPECT_LE(same_next_token, 2);
}

// The host's two-words-at-a-time loops give exactly the per-word definition at every size and
// alignment, and the difference bits are exactly the flipped ones, the tail beyond the size
// never counted.
TEST(Stamps, TheHostsWholeStateLoopsEqualThePerWordDefinition) {
  std::vector<std::byte> buffer(200 + 16);
  for (std::size_t align = 0; align < 8; ++align)
    for (std::size_t size = 0; size <= 200; size += (size < 40 ? 1 : 37)) {
      const std::uint64_t seed = mix64(size * 8 + align);
      std::fill(buffer.begin(), buffer.end(), std::byte{0xA5});
      const std::span<std::byte> out = std::span(buffer).subspan(align, size);
      fill_temporal_seeded(out, seed);
      for (std::size_t b = 0; b < size; ++b)
        ASSERT_EQ(static_cast<std::uint8_t>(out[b]),
                  static_cast<std::uint8_t>(
                      temporal_value(seed, static_cast<std::int64_t>(b / 8)) >> (8 * (b % 8))))
            << "size " << size << " align " << align << " byte " << b;
      ASSERT_EQ(buffer[align + size], std::byte{0xA5}) << "wrote past the end";
      ASSERT_EQ(temporal_difference_bits(out, seed), 0u) << size;
      if (size > 0) {
        ASSERT_NE(temporal_difference_bits(out, seed + 1), 0u) << size;
      }
      for (std::size_t b = 0; b < size; ++b) {
        out[b] ^= std::byte{0x04};
        ASSERT_EQ(temporal_difference_bits(out, seed), std::uint64_t{0x04} << (8 * (b % 8)))
            << "size " << size << " align " << align << " byte " << b;
        out[b] ^= std::byte{0x04};
      }
      buffer[align + size] ^= std::byte{0xff}; // past the end: not part of the state
      ASSERT_EQ(temporal_difference_bits(out, seed), 0u) << size;
    }
}

} // namespace
} // namespace mc::model
