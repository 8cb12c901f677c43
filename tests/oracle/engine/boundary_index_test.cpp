// The prefix-cache index: the fast table against the plain map under random inserts and erases
// (small tables, so probe runs wrap around and erase shifts entries back across the end), and
// the pool's numbered registrations.
#include "oracle/engine/block_pool.h"
#include "oracle/engine/boundary_index.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace mc::oracle::engine {
namespace {

TEST(BoundaryIndex, FastAndPlainAgreeUnderRandomInsertsAndErases) {
  for (const std::int32_t capacity : {1, 7, 8, 64}) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(capacity));
    BoundaryIndex fast(capacity, Structures::fast);
    BoundaryIndex plain(capacity, Structures::reference);
    // Few distinct hashes, some equal in their high bits (one home slot), so runs collide.
    const auto hash_of = [](std::uint64_t r) { return r < 12 ? r : (r << 60) | 5; };
    for (int op = 0; op < 20000; ++op) {
      const model::TokenHash h = hash_of(rng() % 24);
      const bool indexed = plain.find(h).has_value();
      if (rng() % 2 == 0 && plain.size() > 0) {
        if (!indexed) continue;
        fast.erase(h);
        plain.erase(h);
      } else if (plain.size() < capacity || indexed) {
        const auto block = static_cast<std::int32_t>(rng() % 100);
        const bool inserted = plain.insert(h, block);
        ASSERT_EQ(fast.insert(h, block), inserted) << op;
        ASSERT_EQ(inserted, !indexed) << op;
      }
      ASSERT_EQ(fast.size(), plain.size());
      for (std::uint64_t probe = 0; probe < 24; ++probe)
        ASSERT_EQ(fast.find(hash_of(probe)), plain.find(hash_of(probe)))
            << "capacity " << capacity << " op " << op;
    }
    fast.clear();
    plain.clear();
    EXPECT_EQ(fast.size(), 0);
    EXPECT_EQ(plain.size(), 0);
    EXPECT_FALSE(fast.find(3).has_value());
    EXPECT_FALSE(plain.find(3).has_value());
  }
}

TEST(BlockPool, RegistrationsAreNumberedAndTheLogIsBounded) {
  BlockPool pool(8, Structures::fast);
  EXPECT_EQ(pool.num_registrations(), 0u);
  const std::vector<std::int32_t> blocks = pool.take(7); // every block but the null one
  ASSERT_EQ(blocks, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7}));
  pool.register_block(2, 100, 0, {}, 4);
  pool.register_block(3, 100, 1, {}, 8); // refused: block 2 holds that boundary; not numbered
  pool.register_block(1, 200, 1, {}, 8);
  EXPECT_EQ(pool.num_registrations(), 2u);
  const auto all = pool.registered_since(0);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(std::vector<std::int32_t>(all->begin(), all->end()), (std::vector<std::int32_t>{2, 1}));
  EXPECT_EQ(pool.registered_since(1)->size(), 1u);
  EXPECT_TRUE(pool.registered_since(2)->empty());
  EXPECT_FALSE(pool.registered_since(3).has_value()); // not numbered yet
  // Register and evict block 3 until the log drops its oldest half: early numbers are gone.
  for (int i = 0; i < 2000; ++i) {
    pool.free(3);
    ASSERT_EQ(pool.take(1), std::vector<std::int32_t>{3}) << i; // 3 is the only free block
    pool.register_block(3, 1000 + static_cast<std::uint64_t>(i), 2, {}, 12);
  }
  pool.free(3);
  EXPECT_EQ(pool.num_registrations(), 2002u);
  EXPECT_FALSE(pool.registered_since(0).has_value());
  const auto last = pool.registered_since(2001);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(std::vector<std::int32_t>(last->begin(), last->end()), std::vector<std::int32_t>{3});
  EXPECT_EQ(pool.lookup(1000 + 1999), 3);
  EXPECT_FALSE(pool.lookup(1000 + 1998).has_value()); // evicted when 3 was taken again
}

// vLLM's pool keeps every block registered with a boundary; a lookup finds the first one until
// it is evicted, then the next. Evicting a later holder first leaves the first in place.
TEST(BlockPool, DuplicateBoundariesAreFoundInTheOrderTheyWereRegistered) {
  for (const Structures s : {Structures::fast, Structures::reference}) {
    BlockPool pool(8, s);
    pool.allow_duplicate_boundaries();
    ASSERT_EQ(pool.take(4), (std::vector<std::int32_t>{1, 2, 3, 4}));
    for (const std::int32_t b : {1, 2, 3})
      pool.register_block(b, 77, 0, {}, 4);
    pool.register_block(4, 78, 0, {}, 4);
    for (const std::int32_t b : {1, 2, 3, 4})
      pool.free(b);
    EXPECT_EQ(pool.lookup(77), 1);
    EXPECT_TRUE(pool.taken_elsewhere(2)); // a later holder goes: the first stays found
    EXPECT_EQ(pool.lookup(77), 1);
    EXPECT_TRUE(pool.taken_elsewhere(1));
    EXPECT_EQ(pool.lookup(77), 3);
    EXPECT_TRUE(pool.taken_elsewhere(3));
    EXPECT_FALSE(pool.lookup(77).has_value());
    EXPECT_EQ(pool.lookup(78), 4);
    // The only later holder goes first, then the first: nothing is left behind either.
    ASSERT_EQ(pool.take(2), (std::vector<std::int32_t>{5, 6}));
    pool.register_block(5, 88, 0, {}, 4);
    pool.register_block(6, 88, 0, {}, 4);
    pool.free(5);
    pool.free(6);
    EXPECT_TRUE(pool.taken_elsewhere(6));
    EXPECT_EQ(pool.lookup(88), 5);
    EXPECT_TRUE(pool.taken_elsewhere(5));
    EXPECT_FALSE(pool.lookup(88).has_value());
    // Registered again after all its holders went: one holder, none stale behind it.
    ASSERT_EQ(pool.take(1), std::vector<std::int32_t>{7});
    pool.register_block(7, 77, 0, {}, 4);
    pool.free(7);
    EXPECT_TRUE(pool.taken_elsewhere(7));
    EXPECT_FALSE(pool.lookup(77).has_value());
  }
}

TEST(BlockPool, WithoutDuplicatesASecondHolderIsRefused) {
  BlockPool pool(8, Structures::fast);
  ASSERT_EQ(pool.take(2), (std::vector<std::int32_t>{1, 2}));
  pool.register_block(1, 77, 0, {}, 4);
  pool.register_block(2, 77, 0, {}, 4);
  EXPECT_EQ(pool.cached(2), nullptr);
  pool.free(1);
  EXPECT_TRUE(pool.taken_elsewhere(1));
  EXPECT_FALSE(pool.lookup(77).has_value());
  EXPECT_FALSE(pool.taken_elsewhere(2)); // held
}

} // namespace
} // namespace mc::oracle::engine
