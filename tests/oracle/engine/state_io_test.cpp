// check_temporal compares a block with the temporal state word by word, computed on the fly:
// it must name the first wrong byte wherever it lies (inside a run of words, in the words
// after the last run, in a tail shorter than a word) and recognise another count's state.
#include "model/arena.h"
#include "model/layout.h"
#include "model/stamps.h"
#include "oracle/engine/state_io.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace mc::oracle::engine {
namespace {

TEST(StateIo, CheckTemporalNamesTheFirstWrongByteAnywhere) {
  // 76 natural bytes: two runs of four words, one more word and a 4-byte tail.
  const model::StateTensor t{.shape = {.name = "temporal", .kind = model::StateKind::temporal},
                             .elem_size = 4,
                             .natural_bytes = 76,
                             .arena = 0,
                             .offset_bytes = 0,
                             .block_stride_bytes = 80};
  model::Arena arena(3 * 80);
  arena.poison();
  const BlockRef ref{
      .arena = &arena, .tensor = &t, .tensor_index = 3, .num_blocks = 3, .block_id = 2};
  const std::array<model::TokenHash, 3> hashes{model::kEmptySequenceHash,
                                               model::extend_hash(model::kEmptySequenceHash, 7),
                                               model::extend_hash(model::kEmptySequenceHash, 8)};
  write_temporal(ref, hashes[1]);
  EXPECT_EQ(check_temporal(ref, hashes[1], hashes), std::nullopt);
  const auto held = check_temporal(ref, hashes[2], hashes);
  ASSERT_TRUE(held.has_value());
  EXPECT_NE(held->find("it holds the state after 1 tokens"), std::string::npos) << *held;
  std::byte* block = arena.data() + 2 * 80;
  for (std::int64_t b = 0; b < t.natural_bytes; ++b) {
    block[b] ^= std::byte{0x10};
    const auto wrong = check_temporal(ref, hashes[1], hashes);
    ASSERT_TRUE(wrong.has_value()) << "byte " << b;
    EXPECT_NE(wrong->find("differs from byte " + std::to_string(b) + " (not the state"),
              std::string::npos)
        << *wrong;
    block[b] ^= std::byte{0x10};
  }
  block[76] ^= std::byte{0x10}; // page padding past the natural bytes is not the state
  EXPECT_EQ(check_temporal(ref, hashes[1], hashes), std::nullopt);
}

} // namespace
} // namespace mc::oracle::engine
