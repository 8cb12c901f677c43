// Each of the engine oracle's speed structures (oracle/engine/structures.h) against its plain
// implementation: both driven with the same random operations, every result compared exactly.
// (The prefix-cache index: boundary_index_test.cpp.)
#include "model/block_table.h"
#include "model/stamps.h"
#include "oracle/engine/block_manager.h"
#include "oracle/engine/cached_selection.h"
#include "oracle/engine/free_queue.h"
#include "oracle/engine/listed_rows.h"
#include "oracle/engine/request_records.h"
#include "oracle/engine/table_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace mc::oracle::engine {
namespace {

std::int32_t draw(std::mt19937_64& rng, std::int32_t lo, std::int32_t hi) {
  return std::uniform_int_distribution<std::int32_t>(lo, hi)(rng);
}

TEST(FreeQueue, FastAndPlainAgreeUnderRandomPushesPopsAndRemovals) {
  constexpr std::int32_t kBlocks = 12;
  std::mt19937_64 rng(7);
  FreeQueue fast(kBlocks, Structures::fast);
  FreeQueue plain(kBlocks, Structures::reference);
  for (int op = 0; op < 50000; ++op) {
    const std::int32_t block = draw(rng, 0, kBlocks - 1);
    const bool queued = plain.contains(block);
    ASSERT_EQ(fast.contains(block), queued) << op;
    switch (draw(rng, 0, 2)) {
    case 0:
      if (!queued) {
        fast.push_back(block);
        plain.push_back(block);
      }
      break;
    case 1:
      if (plain.size() > 0) {
        ASSERT_EQ(fast.pop_front(), plain.pop_front()) << op;
      }
      break;
    default:
      if (queued) {
        fast.remove(block);
        plain.remove(block);
      }
    }
    ASSERT_EQ(fast.size(), plain.size()) << op;
  }
  while (plain.size() > 0) // the same order to the end
    ASSERT_EQ(fast.pop_front(), plain.pop_front());
}

TEST(RequestRecords, FastAndPlainFindTheSameRecordsWhateverTheKeys) {
  std::mt19937_64 rng(11);
  RequestRecords<int> fast(Structures::fast);
  RequestRecords<int> plain(Structures::reference);
  int next_value = 0;
  for (int op = 0; op < 50000; ++op) {
    const std::string id = "r" + std::to_string(draw(rng, 0, 7));
    const std::int32_t key = draw(rng, -1, 9); // reused for other ids, or missing (-1)
    switch (draw(rng, 0, 3)) {
    case 0: {
      bool fast_inserted = false;
      bool plain_inserted = false;
      int& f = fast.emplace(id, key, &fast_inserted);
      int& p = plain.emplace(id, key, &plain_inserted);
      ASSERT_EQ(fast_inserted, plain_inserted) << op;
      if (plain_inserted) f = p = ++next_value;
      ASSERT_EQ(f, p) << op;
      break;
    }
    case 1:
      fast.erase(id);
      plain.erase(id);
      break;
    default: {
      const int* f = fast.find(id, key);
      const int* p = plain.find(id, key);
      ASSERT_EQ(f == nullptr, p == nullptr) << op;
      if (p != nullptr) {
        ASSERT_EQ(*f, *p) << op;
      }
    }
    }
    ASSERT_EQ(fast.contains(id), plain.contains(id)) << op;
    ASSERT_EQ(fast.empty(), plain.empty()) << op;
  }
}

TEST(ListedRows, FastAndPlainResolveEveryRowToTheSameRecord) {
  std::mt19937_64 rng(13);
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i)
    ids.push_back("r" + std::to_string(i));
  std::vector<int> records(ids.size());
  const auto lookup = [&](const std::string& id) -> int& {
    const auto at = std::find(ids.begin(), ids.end(), id) - ids.begin();
    return records[static_cast<std::size_t>(at)];
  };
  ListedRows<int> fast(Structures::fast);
  ListedRows<int> plain(Structures::reference);
  for (int step = 0; step < 5000; ++step) {
    // A batch of distinct requests, cached ones first as the scheduler lists them; a trace may
    // order its rows otherwise.
    std::vector<std::size_t> batch(ids.size());
    for (std::size_t i = 0; i < batch.size(); ++i)
      batch[i] = i;
    std::shuffle(batch.begin(), batch.end(), rng);
    batch.resize(static_cast<std::size_t>(draw(rng, 0, 10)));
    const auto num_cached = static_cast<std::size_t>(draw(rng, 0, static_cast<int>(batch.size())));
    fast.clear();
    plain.clear();
    for (std::size_t b = 0; b < batch.size(); ++b) {
      const std::string& id = ids[batch[b]];
      if (b < num_cached) {
        fast.add_cached(id, lookup(id));
        plain.add_cached(id, lookup(id));
      } else {
        fast.add_new(id, lookup(id));
        plain.add_new(id, lookup(id));
      }
    }
    if (draw(rng, 0, 3) == 0) std::shuffle(batch.begin(), batch.end(), rng);
    for (const std::size_t row : batch) {
      const std::string& id = ids[row];
      ASSERT_EQ(&fast.next_row(id, lookup), &plain.next_row(id, lookup)) << step;
    }
  }
}

TEST(TableSearch, FastAndPlainAgreeOnRandomRows) {
  std::mt19937_64 rng(17);
  const auto row = [&](std::int32_t len_max) {
    std::vector<std::int32_t> r(static_cast<std::size_t>(draw(rng, 0, len_max)));
    for (std::int32_t& id : r)
      id = draw(rng, model::kNullBlockId, 4);
    return r;
  };
  for (int i = 0; i < 100000; ++i) {
    const std::vector<std::int32_t> ids = row(8);
    const std::int32_t col = draw(rng, -2, 9);
    const std::int32_t block = draw(rng, 0, 5);
    ASSERT_EQ(holds(ids, col, block, Structures::fast),
              holds(ids, col, block, Structures::reference))
        << i;
    std::vector<std::int32_t> got = row(8);
    if (draw(rng, 0, 1) == 0) got = ids; // mostly agreeing rows, as after a step
    ASSERT_EQ(first_disagreement(ids, got, Structures::fast),
              first_disagreement(ids, got, Structures::reference))
        << i;
  }
}

// Random takes, frees and registrations on two pools; both selections pick the same blocks
// every time, whether a few or more registrations than the pool's log keeps happened since.
TEST(CachedSelection, FastAndPlainSelectTheSameBlocks) {
  constexpr std::int32_t kBlocks = 8;
  std::mt19937_64 rng(19);
  std::vector<BlockPool> pools;
  pools.emplace_back(kBlocks, Structures::fast);
  pools.emplace_back(kBlocks, Structures::fast);
  std::vector<std::vector<std::int32_t>> held(pools.size());
  CachedSelection fast(Structures::fast);
  CachedSelection plain(Structures::reference);
  std::int64_t fallbacks = 0;
  for (int round = 0; round < 400; ++round) {
    const std::uint64_t registrations_before = pools[0].num_registrations();
    const int num_ops = draw(rng, 0, 9) == 0 ? 12000 : draw(rng, 0, 12);
    for (int op = 0; op < num_ops; ++op) {
      const auto g = static_cast<std::size_t>(draw(rng, 0, 1));
      BlockPool& pool = pools[g];
      std::vector<std::int32_t>& mine = held[g];
      const int what = draw(rng, 0, 2);
      if (what == 0 && pool.num_free() > 0) {
        pool.take(1, mine);
      } else if (what == 1 && !mine.empty()) {
        const auto at = static_cast<std::size_t>(draw(rng, 0, static_cast<int>(mine.size()) - 1));
        pool.free(mine[at]);
        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(at));
      } else if (!mine.empty()) {
        const std::int32_t block =
            mine[static_cast<std::size_t>(draw(rng, 0, static_cast<int>(mine.size()) - 1))];
        if (pool.cached(block) == nullptr)
          pool.register_block(block, static_cast<model::TokenHash>(draw(rng, 0, 20)),
                              draw(rng, 0, 5), {}, 4);
      }
    }
    fallbacks += pools[0].registered_since(registrations_before).has_value() ? 0 : 1;
    const bool sweep_all = draw(rng, 0, 15) == 0;
    fast.select(pools, sweep_all);
    plain.select(pools, sweep_all);
    for (std::size_t g = 0; g < pools.size(); ++g) {
      const std::span<const CachedSelection::Entry> f = fast.selected(g);
      const std::span<const CachedSelection::Entry> p = plain.selected(g);
      ASSERT_EQ(std::vector(f.begin(), f.end()), std::vector(p.begin(), p.end()))
          << "round " << round << " group " << g;
    }
    fast.mark_checked();
    plain.mark_checked();
  }
  EXPECT_GT(fallbacks, 0); // the fast one walked every block where its log fell short
}

// Two block managers, fast and plain, driven like a scheduler drives one (admissions with
// prefix hits, growth, stale-block frees, registrations after each commit, preemptions and
// finishes), with requests sharing prefixes; their tables and pools are compared after every
// operation.
class BlockManagers {
public:
  explicit BlockManagers(const model::CacheConfig& config)
      : config_(config), fast_(config, 2, 24, Structures::fast),
        plain_(config, 2, 24, Structures::reference) {}

  void expect_same(int op) const {
    for (const Request& r : requests_) {
      const RequestBlocks* f = fast_.find(r.id);
      const RequestBlocks* p = plain_.find(r.id);
      ASSERT_EQ(f == nullptr, p == nullptr) << op << " " << r.id;
      if (p == nullptr) continue;
      ASSERT_EQ(f->allocated, p->allocated) << op;
      for (std::size_t g = 0; g < p->groups.size(); ++g) {
        ASSERT_EQ(f->groups[g].block_ids, p->groups[g].block_ids) << op << " " << r.id;
        ASSERT_EQ(f->groups[g].last_state_idx, p->groups[g].last_state_idx) << op;
      }
    }
    for (std::int32_t g = 0; g < plain_.num_groups(); ++g) {
      const BlockPool& f = fast_.pool(g);
      const BlockPool& p = plain_.pool(g);
      ASSERT_EQ(f.num_free(), p.num_free()) << op;
      ASSERT_EQ(f.num_registrations(), p.num_registrations()) << op;
      for (std::int32_t b = 0; b < p.num_blocks(); ++b) {
        ASSERT_EQ(f.ref_count(b), p.ref_count(b)) << op << " block " << b;
        ASSERT_EQ(f.cached(b) == nullptr, p.cached(b) == nullptr) << op << " block " << b;
        if (p.cached(b) == nullptr) continue;
        ASSERT_EQ(f.cached(b)->hash, p.cached(b)->hash) << op;
        ASSERT_EQ(f.cached(b)->position, p.cached(b)->position) << op;
        ASSERT_EQ(f.cached(b)->tail_tokens, p.cached(b)->tail_tokens) << op;
        ASSERT_EQ(f.lookup(p.cached(b)->hash), p.lookup(p.cached(b)->hash)) << op;
      }
    }
  }

  void run(std::uint64_t seed, int num_ops) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 6; ++i) {
      Request r{.id = "r" + std::to_string(i)};
      for (int t = 0; t < 48; ++t) // two prefix families, then tokens of its own
        r.tokens.push_back(t < 24 ? (i % 2) * 1000 + t : i * 100 + t);
      r.hashes.push_back(model::kEmptySequenceHash);
      for (const std::int32_t t : r.tokens)
        r.hashes.push_back(model::extend_hash(r.hashes.back(), t));
      requests_.push_back(std::move(r));
    }
    for (int op = 0; op < num_ops; ++op) {
      Request& r = requests_[static_cast<std::size_t>(draw(rng, 0, 5))];
      if (!r.held)
        admit(r, draw(rng, 1, 9));
      else if (draw(rng, 0, 9) == 0)
        leave(r); // preempted or finished
      else
        grow(r, draw(rng, 1, 6));
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_NO_FATAL_FAILURE(expect_same(op));
    }
  }

private:
  struct Request {
    std::string id;
    std::vector<std::int32_t> tokens;
    std::vector<model::TokenHash> hashes;
    std::int32_t num_computed = 0;
    bool held = false;
  };
  static constexpr std::int32_t kTailTokens = 3;

  void admit(Request& r, std::int32_t num_new) {
    const std::int32_t B = config_.mamba_block_size;
    const auto prompt = static_cast<std::int32_t>(r.tokens.size()) / 2;
    std::vector<model::TokenHash> boundaries;
    for (std::int32_t p = 0; (p + 1) * B <= prompt - 1; ++p)
      boundaries.push_back(r.hashes[static_cast<std::size_t>((p + 1) * B)]);
    const auto n = static_cast<std::int32_t>(boundaries.size());
    const std::int32_t hit = plain_.find_cache_hit(boundaries, n);
    ASSERT_EQ(fast_.find_cache_hit(boundaries, n), hit);
    r.num_computed = hit >= 0 ? (hit + 1) * B : 0;
    if (hit >= 0) {
      fast_.start_with_hit(r.id, r.num_computed, boundaries[static_cast<std::size_t>(hit)]);
      plain_.start_with_hit(r.id, r.num_computed, boundaries[static_cast<std::size_t>(hit)]);
    }
    const std::int32_t tokens = r.num_computed + num_new;
    const bool can = plain_.can_allocate(r.id, tokens);
    ASSERT_EQ(fast_.can_allocate(r.id, tokens), can);
    if (!can) {
      leave(r);
      return;
    }
    ASSERT_EQ(fast_.allocate(r.id, tokens), plain_.allocate(r.id, tokens));
    r.held = true;
    commit(r, num_new);
  }

  void grow(Request& r, std::int32_t num_new) {
    const std::int32_t tokens = r.num_computed + num_new;
    if (tokens >= static_cast<std::int32_t>(r.tokens.size())) {
      leave(r); // finished
      return;
    }
    fast_.remove_skipped(r.id, r.num_computed);
    plain_.remove_skipped(r.id, r.num_computed);
    const bool can = plain_.can_allocate(r.id, tokens);
    ASSERT_EQ(fast_.can_allocate(r.id, tokens), can);
    ASSERT_EQ(fast_.num_new_blocks(r.id, tokens), plain_.num_new_blocks(r.id, tokens));
    if (!can) {
      leave(r);
      return;
    }
    ASSERT_EQ(fast_.allocate(r.id, tokens), plain_.allocate(r.id, tokens));
    commit(r, num_new);
  }

  void commit(Request& r, std::int32_t num_new) {
    r.num_computed += num_new;
    fast_.cache_blocks(r.id, r.num_computed, r.hashes, r.tokens, kTailTokens);
    plain_.cache_blocks(r.id, r.num_computed, r.hashes, r.tokens, kTailTokens);
  }

  void leave(Request& r) {
    fast_.free_request(r.id);
    plain_.free_request(r.id);
    r.held = false;
    r.num_computed = 0;
  }

  model::CacheConfig config_;
  BlockManager fast_;
  BlockManager plain_;
  std::vector<Request> requests_;
};

TEST(BlockManager, FastAndPlainStructuresKeepTheSameTablesAndPools) {
  const model::CacheConfig align{
      .mamba_block_size = 4, .attn_block_size = 2, .num_spec_tokens = 2, .num_spec_blocks = 2};
  model::CacheConfig all = align;
  all.mode = model::CacheMode::all;
  all.num_spec_tokens = 0;
  all.num_spec_blocks = 0;
  for (const model::CacheConfig& config : {align, all}) {
    for (const std::uint64_t seed : {1, 2, 3}) {
      BlockManagers managers(config);
      ASSERT_NO_FATAL_FAILURE(managers.run(seed, 3000))
          << "mode " << static_cast<int>(config.mode) << " seed " << seed;
    }
  }
}

} // namespace
} // namespace mc::oracle::engine
