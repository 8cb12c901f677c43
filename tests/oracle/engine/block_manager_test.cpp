// The align-mode block manager against tables derived by hand from REFERENCE.md 3
// (B = 4, nsb = 2, one group, 16 blocks, free queue 1..15 in order), and "all" mode; on the
// fast and on the plain structures (oracle/engine/structures.h).
#include "model/stamps.h"
#include "oracle/engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mc::oracle::engine {
namespace {

using Table = std::vector<std::int32_t>;

model::CacheConfig align_config() {
  return {.mamba_block_size = 4, .attn_block_size = 2, .num_spec_tokens = 2, .num_spec_blocks = 2};
}

Table table(const BlockManager& m, const std::string& id) {
  return m.find(id)->groups[0].block_ids;
}

// 40 tokens 7, 8, ... and their running hashes (h[p]: the first p tokens).
std::pair<std::vector<std::int32_t>, std::vector<model::TokenHash>> tokens_and_hashes() {
  std::vector<std::int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 7);
  std::vector<model::TokenHash> h{model::kEmptySequenceHash};
  for (const std::int32_t t : tokens)
    h.push_back(model::extend_hash(h.back(), t));
  return {tokens, h};
}

class BlockManagerByHand : public ::testing::TestWithParam<Structures> {};
class BlockPoolByHand : public ::testing::TestWithParam<Structures> {};

TEST_P(BlockManagerByHand, AlignGrowthMovesSpecBlocksAndFreesTheStaleRunningBlock) {
  BlockManager m(align_config(), 1, 16, GetParam());
  EXPECT_EQ(m.allocate("a", 4)[0], (Table{1, 2, 3})); // 1 + nsb new, running at 0
  m.remove_skipped("a", 4);
  EXPECT_EQ(m.allocate("a", 5)[0], (Table{4})); // one new block, running at 1
  EXPECT_EQ(m.find("a")->groups[0].last_state_idx, 0);
  m.remove_skipped("a", 5); // 0 < cdiv(5, 4) - 1: block 1 is freed
  EXPECT_EQ(table(m, "a"), (Table{0, 2, 3, 4}));
  EXPECT_EQ(m.pool(0).num_free(), 12);
  EXPECT_TRUE(m.allocate("a", 8)[0].empty()); // still 2 + 2 entries
  // A chunk to 14 tokens: running at 3; the old spec block at 2 moves to the end.
  EXPECT_EQ(m.allocate("a", 14)[0], (Table{3, 5}));
  EXPECT_EQ(table(m, "a"), (Table{0, 2, 0, 4, 3, 5}));
  EXPECT_EQ(m.find("a")->groups[0].last_state_idx, 1);
  m.remove_skipped("a", 8); // 1 < cdiv(8, 4) - 1 fails: block 2 is still a copy source
  EXPECT_EQ(table(m, "a"), (Table{0, 2, 0, 4, 3, 5}));
  m.remove_skipped("a", 12);
  EXPECT_EQ(table(m, "a"), (Table{0, 0, 0, 4, 3, 5}));
  // Column 1 sat right below the threshold: a walk down from it reaches it before any null.
  EXPECT_EQ(m.retired_across_null(), 0);
}

TEST_P(BlockManagerByHand, LargeChunkPadsNullsAndMovesEverySpecBlock) {
  BlockManager m(align_config(), 1, 16, GetParam());
  m.allocate("a", 4); // [1 2 3]
  // Tail from the old length 3: one null (to the running position 4), spec blocks 2 and 3
  // moved to the end (their old positions nulled), one new block.
  EXPECT_EQ(m.allocate("a", 20)[0], (Table{0, 2, 3, 4}));
  EXPECT_EQ(table(m, "a"), (Table{1, 0, 0, 0, 2, 3, 4}));
  EXPECT_EQ(m.num_new_blocks("a", 24), 1);
  // The previous running block (column 0) lies below the nulls the chunk padded: retiring it
  // crosses a null gap, where vLLM's walk down from the threshold stopped (#55450).
  EXPECT_EQ(m.retired_across_null(), 0);
  m.remove_skipped("a", 20);
  EXPECT_EQ(table(m, "a"), (Table{0, 0, 0, 0, 2, 3, 4}));
  EXPECT_EQ(m.retired_across_null(), 1);
}

TEST_P(BlockManagerByHand, PrefixHitStartsWithNullsThenTheSingleHitBlock) {
  BlockManager m(align_config(), 1, 16, GetParam());
  const auto [tokens, h] = tokens_and_hashes();
  m.allocate("a", 4);                    // [1 2 3]
  m.allocate("a", 14);                   // [1 0 0 2 3 4]: block 2 runs at position 3
  m.cache_blocks("a", 16, h, tokens, 3); // positions 0 (block 1) and 3 (block 2)
  ASSERT_NE(m.pool(0).cached(2), nullptr);
  EXPECT_EQ(m.pool(0).cached(2)->position, 3);
  const std::vector<model::TokenHash> boundaries{h[4], h[8], h[12], h[16]};
  EXPECT_EQ(m.find_cache_hit(boundaries, 4), 3); // the rightmost cached boundary
  EXPECT_EQ(m.find_cache_hit(boundaries, 3), 0);
  m.start_with_hit("b", 16, h[16]);
  EXPECT_EQ(table(m, "b"), (Table{0, 0, 0, 2}));
  EXPECT_EQ(m.pool(0).ref_count(2), 2);
  EXPECT_EQ(m.num_new_blocks("b", 18), 3);
  EXPECT_EQ(m.allocate("b", 18)[0], (Table{5, 6, 7}));
  EXPECT_EQ(m.find("b")->groups[0].last_state_idx, 3); // the hit block is the copy source
  m.free_request("a");
  EXPECT_EQ(m.pool(0).ref_count(2), 1);
  EXPECT_NE(m.pool(0).lookup(h[4]), std::nullopt); // freed but still cached (evictable)
}

// Partial-hash hits (hash unit 2 below B = 4): the producer caches its prompt's last hash
// boundary (10 of 11 tokens) from the block at column 2; a hit on it takes a private copy; the
// producer's next allocation copies its block away and moves the cache entry to the copy. Both
// ends of each copy stay retained until the copy's step completed.
TEST_P(BlockManagerByHand, PartialHashHitsCopyOnWrite) {
  BlockManager m(align_config(), 1, 24, GetParam(), 2);
  EXPECT_EQ(m.hash_unit(), 2);
  const auto [tokens, h] = tokens_and_hashes();
  m.allocate("a", 4);
  m.cache_blocks("a", 4, h, tokens, 3, 11);
  m.allocate("a", 8);
  m.cache_blocks("a", 8, h, tokens, 3, 11);
  m.allocate("a", 10);
  m.cache_blocks("a", 9, h, tokens, 3, 11); // not the prompt's last hash boundary: nothing
  EXPECT_EQ(m.find("a")->partial_col, -1);
  m.cache_blocks("a", 10, h, tokens, 3, 11);
  ASSERT_EQ(m.find("a")->partial_col, 2);
  const std::int32_t source = table(m, "a")[2];
  ASSERT_NE(m.pool(0).cached(source), nullptr);
  EXPECT_EQ(m.pool(0).cached(source)->num_tokens, 10);
  EXPECT_EQ(m.pool(0).cached(source)->position, 2);
  EXPECT_EQ(m.pool(0).lookup(h[10]), source);
  EXPECT_TRUE(m.take_copies(3).empty());

  // A hit of 10 tokens: the hit block at column 2, then its private copy there.
  m.start_with_hit("b", 10, h[10]);
  EXPECT_EQ(table(m, "b"), (Table{0, 0, source}));
  EXPECT_EQ(m.find("b")->partial_col, 2);
  EXPECT_EQ(m.num_new_blocks("b", 12), 3); // the running block, nsb speculative, the copy
  m.allocate("b", 12);
  const std::int32_t copy = table(m, "b")[2];
  EXPECT_NE(copy, source);
  EXPECT_EQ(m.find("b")->partial_col, -1);
  EXPECT_TRUE(m.copy_pending(0, copy));
  EXPECT_EQ(m.take_copies(4),
            (std::vector<model::BlockCopy>{{.group = 0, .src = source, .dst = copy}}));
  EXPECT_FALSE(m.copy_pending(0, copy));
  EXPECT_EQ(m.pool(0).ref_count(source), 2); // a's table and the copy's retention
  EXPECT_EQ(m.pool(0).retained(source), 1);
  EXPECT_EQ(m.pool(0).ref_count(copy), 2); // b's table and the retention
  EXPECT_EQ(m.pool(0).retained(copy), 1);
  EXPECT_EQ(m.pool(0).cached(copy), nullptr);
  EXPECT_EQ(m.check_accounting(), std::nullopt);
  m.release_copies(3); // an earlier step's completion releases nothing of step 4
  EXPECT_EQ(m.pool(0).retained(copy), 1);
  m.release_copies(4);
  EXPECT_EQ(m.pool(0).ref_count(source), 1);
  EXPECT_EQ(m.pool(0).ref_count(copy), 1);
  EXPECT_EQ(m.check_accounting(), std::nullopt);

  // The producer runs on: its block stays in its table, the cached state moves to a copy.
  EXPECT_EQ(m.num_new_blocks("a", 11), 1);
  m.allocate("a", 11);
  EXPECT_EQ(table(m, "a")[2], source);
  const std::vector<model::BlockCopy> copies = m.take_copies(5);
  ASSERT_EQ(copies.size(), 1U);
  const std::int32_t moved = copies[0].dst;
  EXPECT_EQ(copies[0].src, source);
  EXPECT_EQ(m.pool(0).cached(source), nullptr);
  ASSERT_NE(m.pool(0).cached(moved), nullptr);
  EXPECT_EQ(m.pool(0).cached(moved)->num_tokens, 10);
  EXPECT_EQ(m.pool(0).ref_count(source), 2);
  EXPECT_EQ(m.pool(0).ref_count(moved), 1); // the retention alone
  EXPECT_EQ(m.check_accounting(), std::nullopt);
  m.release_copies(5);
  EXPECT_EQ(m.pool(0).ref_count(moved), 0);
  EXPECT_TRUE(m.pool(0).queued(moved));
  EXPECT_EQ(m.pool(0).lookup(h[10]), moved); // free, and still findable
  EXPECT_EQ(m.check_accounting(), std::nullopt);
}

// A hit on a block a copy of this very planning fills waits (vLLM's same-step guard).
TEST_P(BlockManagerByHand, AHitOnACopyNotRunYetWaits) {
  BlockManager m(align_config(), 1, 24, GetParam(), 2);
  const auto [tokens, h] = tokens_and_hashes();
  m.allocate("a", 4);
  m.allocate("a", 6);
  m.cache_blocks("a", 6, h, tokens, 3, 7); // 7 tokens: the tail is 6
  m.allocate("a", 7);                      // the copy moves the entry
  const std::vector<model::TokenHash> boundaries{h[2], h[4], h[6]};
  EXPECT_EQ(m.find_cache_hit(boundaries, 3), -2);
  m.take_copies(2);
  EXPECT_EQ(m.find_cache_hit(boundaries, 3), 2);
}

TEST_P(BlockManagerByHand, AllModeKeepsOneBlockPerBlockSizeTokens) {
  model::CacheConfig c = align_config();
  c.mode = model::CacheMode::all;
  c.num_spec_tokens = 0;
  c.num_spec_blocks = 0;
  BlockManager m(c, 2, 8, GetParam());
  // Group 1's free queue starts half the pool later (7 usable blocks: at 1 + 7 / 2), so the two
  // groups' tables hold different ids, as vLLM's shared pool gives them.
  const model::GroupBlockIds first = m.allocate("a", 9);
  EXPECT_EQ(first[0], (Table{1, 2, 3}));
  EXPECT_EQ(first[1], (Table{4, 5, 6}));
  m.remove_skipped("a", 9); // nothing is freed in all mode
  EXPECT_EQ(m.allocate("a", 13)[0], (Table{4}));
  EXPECT_EQ(table(m, "a"), (Table{1, 2, 3, 4}));
  EXPECT_FALSE(m.can_allocate("a", 40)); // 10 blocks > 7 usable
}

TEST_P(BlockManagerByHand, AccountingPlacesEveryBlockOnceAndNamesOneOutOfPlace) {
  BlockManager m(align_config(), 1, 16, GetParam());
  EXPECT_EQ(m.check_accounting(), std::nullopt);
  m.allocate("a", 4); // blocks 1, 2, 3
  m.allocate("b", 9); // 4, 5, 6 after two nulls
  m.mark_in_flight(*m.find("a"), 0);
  m.free_request("a"); // held back while in flight: referenced by nobody, not free either
  EXPECT_EQ(m.check_accounting(), std::nullopt);
  m.release_in_flight();
  EXPECT_EQ(m.check_accounting(), std::nullopt);
  m.mutable_pool(0).touch(5); // a reference no table entry accounts for
  EXPECT_EQ(m.check_accounting(),
            std::optional<std::string>("block 5 of group 0 has 2 references, but 1 table "
                                       "entries hold it"));
  m.mutable_pool(0).free(5);
  m.mutable_pool(0).free(4); // b's table still names it, the pool has it free
  EXPECT_EQ(m.check_accounting(),
            std::optional<std::string>("block 4 of group 0 has 0 references, but 1 table "
                                       "entries hold it"));
}

TEST_P(BlockPoolByHand, NullBlockIsNeverHandedOutAndFreesInFlightAreHeldBack) {
  BlockPool p(5, GetParam());
  EXPECT_EQ(p.take(3), (Table{1, 2, 3}));
  p.mark_in_flight(2); // async: a table of the step in flight holds blocks 2 and 3
  p.mark_in_flight(3);
  p.free(1); // not in flight: free at once
  p.free(2); // in flight: held back
  EXPECT_EQ(p.num_free(), 2);
  EXPECT_TRUE(p.held_back(2));
  EXPECT_FALSE(p.held_back(3)); // in flight, but still held by its request
  EXPECT_FALSE(p.held_back(1));
  EXPECT_EQ(p.held_back_blocks().size(), 1u);
  EXPECT_EQ(p.frees_held_back(), 1);
  EXPECT_EQ(p.take(2), (Table{4, 1})); // never the held-back block
  p.release_in_flight();               // the step in flight completed
  EXPECT_FALSE(p.in_flight(2));
  EXPECT_FALSE(p.held_back(2));
  EXPECT_EQ(p.num_free(), 1);
  EXPECT_EQ(p.take(1), (Table{2}));
  p.free(3); // nothing in flight any more
  EXPECT_EQ(p.num_free(), 1);
  EXPECT_EQ(p.frees_held_back(), 1);
}

TEST_P(BlockPoolByHand, AHeldBackCachedBlockIsOutOfTheCachesReachUntilReleased) {
  BlockPool p(4, GetParam());
  EXPECT_EQ(p.take(1), (Table{1}));
  p.register_block(1, 77, 0, {}, 4);
  p.mark_in_flight(1);
  p.free(1);
  EXPECT_FALSE(p.lookup(77).has_value());
  p.release_in_flight();
  EXPECT_EQ(p.lookup(77), 1);
}

INSTANTIATE_TEST_SUITE_P(Both, BlockManagerByHand,
                         ::testing::Values(Structures::fast, Structures::reference));
INSTANTIATE_TEST_SUITE_P(Both, BlockPoolByHand,
                         ::testing::Values(Structures::fast, Structures::reference));

} // namespace
} // namespace mc::oracle::engine
