// The engine oracle's two state stores (oracle/engine/state_store.h): the same random writes,
// launch copies (same-block shifts and aliasing included) and block copies on the meanings
// (alone, and with a small pool's byte mirror) and on the bytes leave the same bytes everywhere
// (every block, the page padding, the whole arenas), and every check, right or wrong, answers the
// same text.
#include "oracle/engine/state_store.h"

#include "model/presets.h"
#include "model/prng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mc::oracle::engine {
namespace {

struct StoreCase {
  const char* preset;
  model::ConvLayout conv_layout;
};

class BothStores : public ::testing::TestWithParam<StoreCase> {
protected:
  void SetUp() override {
    const model::Preset& p = model::find_preset(GetParam().preset);
    model::CacheConfig config = p.config;
    config.conv_layout = GetParam().conv_layout;
    layout_ = model::build_layout(config, p.spec);
    meanings_ = make_state_store(layout_, Structures::fast, 0); // the meanings alone
    mirrored_ = make_state_store(layout_, Structures::fast);
    bytes_ = make_state_store(layout_, Structures::reference);
    tokens_.resize(64);
    for (std::size_t i = 0; i < tokens_.size(); ++i)
      tokens_[i] = static_cast<std::int32_t>(rng_.next() % 7); // repeats: stamps alike by token
    for (std::size_t n = 0; n <= tokens_.size(); ++n)
      hashes_.push_back(model::sequence_hash(std::span(tokens_).first(n)));
  }

  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(rng_.next() % n); }
  std::int32_t tensor() {
    return static_cast<std::int32_t>(below(static_cast<std::int64_t>(layout_.tensors.size())));
  }
  std::int32_t block() { return static_cast<std::int32_t>(1 + below(layout_.spec.num_blocks - 1)); }
  const model::StateTensor& at(std::int32_t tensor) const {
    return layout_.tensors[static_cast<std::size_t>(tensor)];
  }
  // A window of tokens_: a head from 0 and, sometimes, a tail of other tokens after it.
  TokenWindow window(std::vector<std::int32_t>& tail) {
    const auto head = static_cast<std::size_t>(below(static_cast<std::int64_t>(tokens_.size())));
    tail.assign(static_cast<std::size_t>(below(3)), static_cast<std::int32_t>(below(9)));
    return {.first = 0, .head = std::span(tokens_).first(head), .tail = tail};
  }

  // One random write or copy, on both stores.
  void mutate() {
    std::vector<std::int32_t> tail;
    const std::int32_t t = tensor();
    switch (below(4)) {
    case 0:
      if (at(t).kind() == model::StateKind::temporal) {
        const model::TokenHash h = hashes_[static_cast<std::size_t>(below(20))];
        const std::int32_t b = block();
        for (StateStore* store : {meanings_.get(), mirrored_.get(), bytes_.get()})
          store->write_temporal(t, b, h);
      } else {
        const TokenWindow w = window(tail);
        const std::int64_t history = 1 + below(at(t).shape.conv_state_len);
        const std::int64_t running = below(70);
        const std::int32_t b = block();
        for (StateStore* store : {meanings_.get(), mirrored_.get(), bytes_.get()})
          store->write_conv(t, b, history, running, w);
      }
      return;
    case 1:
    case 2: { // a launch's copies: several decisions, a same-block shift now and then
      std::vector<model::CopyDecision> decisions;
      for (std::int64_t k = below(4); k >= 0; --k) {
        model::CopyDecision d{.tensor = tensor(), .src_block_id = block(), .dst_block_id = block()};
        if (below(4) == 0) d.dst_block_id = d.src_block_id;
        if (at(d.tensor).kind() == model::StateKind::conv)
          d.token_bias = static_cast<std::int32_t>(below(at(d.tensor).shape.conv_state_len + 2));
        if (at(d.tensor).conv_layout == model::ConvLayout::DS && d.token_bias > 0 && below(2) == 0)
          d.token_bias = 0;
        decisions.push_back(d);
      }
      for (StateStore* store : {meanings_.get(), mirrored_.get(), bytes_.get()})
        store->apply_copies(decisions);
      return;
    }
    default: {
      const model::BlockCopy c{.group = at(t).group, .src = block(), .dst = block()};
      if (c.src == c.dst) return; // a block copy never has one block at both ends
      for (StateStore* store : {meanings_.get(), mirrored_.get(), bytes_.get()})
        store->copy_blocks(std::span(&c, 1));
    }
    }
  }

  // One random check on both stores: the same answer, word for word.
  void check() {
    std::vector<std::int32_t> tail;
    const std::int32_t t = tensor();
    const std::int32_t b = block();
    if (at(t).kind() == model::StateKind::temporal) {
      const std::size_t p = static_cast<std::size_t>(below(20));
      const std::span<const model::TokenHash> known =
          below(2) == 0 ? std::span<const model::TokenHash>{} : std::span(hashes_);
      const std::optional<std::string> want = bytes_->check_temporal(t, b, hashes_[p], known);
      EXPECT_EQ(meanings_->check_temporal(t, b, hashes_[p], known), want);
      EXPECT_EQ(mirrored_->check_temporal(t, b, hashes_[p], known), want);
      return;
    }
    const TokenWindow w = window(tail);
    const std::int64_t L = at(t).shape.conv_state_len;
    const std::int64_t history = 1 + below(L);
    const std::int64_t num_tokens = below(70);
    const std::int64_t offset = below(L);
    const std::optional<std::string> want =
        bytes_->check_conv(t, b, history, num_tokens, offset, w);
    EXPECT_EQ(meanings_->check_conv(t, b, history, num_tokens, offset, w), want);
    EXPECT_EQ(mirrored_->check_conv(t, b, history, num_tokens, offset, w), want);
  }

  // What the meanings describe for a device (model/expected_bytes.h) is the bytes: the whole
  // arenas, range by range, hold, and one flipped byte is found where it is.
  void expect_descriptions_hold() {
    model::ExpectedStates whole;
    ASSERT_TRUE(meanings_->describe_whole(whole));
    model::ExpectedStates none;
    EXPECT_FALSE(bytes_->describe_whole(none));
    const std::vector<model::Arena>& held = bytes_->arenas();
    std::vector<std::span<const std::byte>> spans;
    std::int64_t covered = 0;
    for (const model::ExpectedRange& r : whole.ranges) {
      spans.push_back(held[static_cast<std::size_t>(r.range.arena)].bytes().subspan(
          static_cast<std::size_t>(r.range.offset_bytes),
          static_cast<std::size_t>(r.range.size_bytes)));
      covered += r.range.size_bytes;
    }
    std::int64_t total = 0;
    for (const model::ArenaSpec& a : layout_.arenas)
      total += a.size_bytes();
    EXPECT_EQ(covered, total); // every byte, once
    std::vector<std::int64_t> first = model::first_differences(whole, spans);
    for (std::size_t i = 0; i < first.size(); ++i)
      ASSERT_EQ(first[i], -1) << "range " << i << " at " << whole.ranges[i].range.offset_bytes;
    const auto i = static_cast<std::size_t>(below(static_cast<std::int64_t>(spans.size())));
    std::vector<std::byte> flipped(spans[i].begin(), spans[i].end());
    const auto k = static_cast<std::size_t>(below(static_cast<std::int64_t>(flipped.size())));
    flipped[k] ^= std::byte{0x40};
    spans[i] = flipped;
    first = model::first_differences(whole, spans);
    EXPECT_EQ(first[i], static_cast<std::int64_t>(k));
  }

  void expect_same_bytes() {
    // Every byte of every arena, as a counterexample takes them.
    const std::vector<model::Arena>& held = bytes_->arenas();
    for (StateStore* store : {meanings_.get(), mirrored_.get()}) {
      const std::vector<model::Arena>& made = store->arenas();
      ASSERT_EQ(made.size(), held.size());
      for (std::size_t a = 0; a < made.size(); ++a)
        ASSERT_EQ(made[a].first_difference(held[a]), -1) << "arena " << a;
    }
    // Ranges as a comparison reads them: one state's natural bytes, and ranges across blocks,
    // padding and several tensors.
    for (int k = 0; k < 40; ++k) {
      const std::int32_t t = tensor();
      model::ArenaRange r{.arena = at(t).arena,
                          .offset_bytes = at(t).block_offset_bytes(block()),
                          .size_bytes = at(t).natural_bytes};
      if (k % 2 == 1) {
        const std::int64_t size = layout_.arenas[static_cast<std::size_t>(r.arena)].size_bytes();
        r.offset_bytes = below(size);
        r.size_bytes = 1 + below(size - r.offset_bytes);
      }
      std::vector<std::byte> ours(static_cast<std::size_t>(r.size_bytes));
      std::vector<std::byte> theirs(ours.size());
      bytes_->read(r, theirs);
      for (StateStore* store : {meanings_.get(), mirrored_.get()}) {
        store->read(r, ours);
        ASSERT_EQ(ours, theirs) << "arena " << r.arena << " bytes " << r.offset_bytes << " + "
                                << r.size_bytes;
      }
    }
  }

  model::Layout layout_;
  std::unique_ptr<StateStore> meanings_;
  std::unique_ptr<StateStore> mirrored_; // meanings with a byte mirror (a small pool's default)
  std::unique_ptr<StateStore> bytes_;
  model::SplitMix64 rng_ = model::SplitMix64::from_seed(11);
  std::vector<std::int32_t> tokens_;
  std::vector<model::TokenHash> hashes_;
};

TEST_P(BothStores, SameBytesAndTextsAfterRandomWritesAndCopies) {
  EXPECT_FALSE(meanings_->keeps_bytes());
  EXPECT_TRUE(mirrored_->keeps_bytes()); // a tiny preset's pool is far below 64 MiB
  EXPECT_TRUE(bytes_->keeps_bytes());
  ASSERT_NO_FATAL_FAILURE(expect_same_bytes()); // poison everywhere
  for (int round = 0; round < 30; ++round) {
    for (int k = 0; k < 20; ++k)
      mutate();
    for (int k = 0; k < 20; ++k)
      check();
    ASSERT_NO_FATAL_FAILURE(expect_same_bytes()) << "round " << round;
    ASSERT_NO_FATAL_FAILURE(expect_descriptions_hold()) << "round " << round;
  }
}

// A right state passes on both; the meanings answer from what they hold, without bytes.
TEST_P(BothStores, RightStatesPassOnBoth) {
  for (std::size_t i = 0; i < layout_.tensors.size(); ++i) {
    const auto t = static_cast<std::int32_t>(i);
    if (at(t).kind() == model::StateKind::temporal) {
      for (StateStore* store : {meanings_.get(), mirrored_.get(), bytes_.get()})
        store->write_temporal(t, 3, hashes_[5]);
      EXPECT_FALSE(meanings_->check_temporal(t, 3, hashes_[5], hashes_));
      EXPECT_FALSE(bytes_->check_temporal(t, 3, hashes_[5], hashes_));
      continue;
    }
    const TokenWindow w{.head = std::span(tokens_).first(9)};
    const std::int64_t history = std::max<std::int64_t>(at(t).shape.conv_state_len - 1, 1);
    for (StateStore* store : {meanings_.get(), mirrored_.get(), bytes_.get()})
      store->write_conv(t, 3, history, 9, w);
    EXPECT_FALSE(meanings_->check_conv(t, 3, history, 9, 0, w));
    EXPECT_FALSE(bytes_->check_conv(t, 3, history, 9, 0, w));
    const std::optional<std::string> wrong = meanings_->check_conv(t, 3, history, 8, 0, w);
    ASSERT_TRUE(wrong.has_value());
    EXPECT_EQ(wrong, bytes_->check_conv(t, 3, history, 8, 0, w));
  }
  ASSERT_NO_FATAL_FAILURE(expect_same_bytes());
}

INSTANTIATE_TEST_SUITE_P(Presets, BothStores,
                         ::testing::Values(StoreCase{"tiny-mamba2", model::ConvLayout::SD},
                                           StoreCase{"tiny-mamba2", model::ConvLayout::DS},
                                           StoreCase{"tiny-gdn", model::ConvLayout::DS},
                                           StoreCase{"tiny-kda", model::ConvLayout::SD},
                                           StoreCase{"tiny-mixed", model::ConvLayout::DS},
                                           StoreCase{"tiny-short-conv", model::ConvLayout::SD}),
                         [](const ::testing::TestParamInfo<StoreCase>& param_info) {
                           std::string name = param_info.param.preset;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name + (param_info.param.conv_layout == model::ConvLayout::SD
                                              ? "_SD"
                                              : "_DS");
                         });

} // namespace
} // namespace mc::oracle::engine
