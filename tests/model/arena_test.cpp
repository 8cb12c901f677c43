#include "model/arena.h"

#include <gtest/gtest.h>

namespace mc::model {
namespace {

TEST(Arena, PoisonIsPositionDependentAndDetectable) {
  Arena a(10000);
  a.poison();
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[123]), poison_byte(123));
  EXPECT_EQ(poison_byte(5), poison_byte(5 + kPoisonPeriod));
  int same = 0;
  for (int i = 1; i < 64; ++i)
    same += poison_byte(i) == poison_byte(i - 1);
  EXPECT_LT(same, 8); // not a constant fill
  Arena b = a.clone();
  EXPECT_EQ(a.first_difference(b), -1);
  b.data()[7777] = static_cast<std::byte>(~static_cast<std::uint8_t>(b.data()[7777]));
  EXPECT_EQ(a.first_difference(b), 7777);
}

TEST(Arena, SparseArenaPastFourGiB) {
  const std::int64_t size = (std::int64_t{5} << 30) + 4096; // 5 GiB, mapped lazily
  Arena a(size);
  const std::int64_t offset = (std::int64_t{1} << 32) + 12345;
  a.poison_range(offset, 100);
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[offset + 7]), poison_byte(offset + 7));
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[offset - 1]), 0);
  a.data()[size - 1] = std::byte{42};
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[size - 1]), 42);
}

} // namespace
} // namespace mc::model
