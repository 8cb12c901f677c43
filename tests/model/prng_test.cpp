// model/prng.h: the streams are pinned, so fuzz seeds, engine seeds and derived tokens replay
// the same cases, steps and prompts on every build and across changes to the code around
// them (the values are those of the raw stream and of the seeded stream at seed 1).
#include "model/prng.h"

#include <gtest/gtest.h>

namespace mc::model {
namespace {

static_assert(splitmix64(0) == mix64(kSplitMixGamma));
static_assert(mix_seed(3, 4, 5) == 0x49912981ad2df15dULL);

TEST(Prng, RawStreamIsPinned) {
  SplitMix64 rng(1);
  EXPECT_EQ(rng.next(), 0x910a2dec89025cc1ULL);
  EXPECT_EQ(rng.next(), 0xbeeb8da1658eec67ULL);
  EXPECT_EQ(rng.below(1000), 590u);
}

TEST(Prng, SeededStreamIsPinned) {
  SplitMix64 rng = SplitMix64::from_seed(1);
  EXPECT_EQ(rng.next(), 0xe217e7ac4d85e060ULL);
  EXPECT_EQ(rng.uniform(-5, 100), 29);
  EXPECT_EQ(rng.uniform32(0, 7), 7);
  EXPECT_TRUE(rng.chance(500'000));
}

TEST(Prng, DrawsStayInRange) {
  SplitMix64 rng = SplitMix64::from_seed(7);
  for (int i = 0; i < 10'000; ++i) {
    const std::int64_t v = rng.uniform(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    ASSERT_LT(rng.below(5), 5u);
  }
  EXPECT_FALSE(rng.chance(0));
  EXPECT_TRUE(rng.chance(1'000'000));
}

} // namespace
} // namespace mc::model
