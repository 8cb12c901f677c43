// The forward kernel body (gpu/engine/forward.cuh) writes the bytes the oracle expects: its
// temporal words, stored little-endian and cut to the natural bytes, equal fill_temporal. Its
// read programs find exactly the bits in which a block differs from the expected state, and a
// write carries them.
// Every split of a conv state's elements over a CTA's lanes writes and reads the same elements
// as one lane does on the host.
// The stamp values themselves are pinned at compile time, so a change to their formulas (which
// both sides share through model/stamps.h) shows here and not only as unreadable checkpoints.
#include "gpu/engine/forward.cuh"
#include "model/stamps.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace mc::gpu::engine {
namespace {

static_assert(model::mix64(12345) == 0xf36cf1164265dd51ULL);
static_assert(model::extend_hash(model::kEmptySequenceHash, 7) == 0x5e0c25471f89e02eULL);
static_assert(model::temporal_word(0x1234567890ULL, 5, 3) == 0x29ae39c67757cb0bULL);
static_assert(model::conv_stamp(42, 17, 3, 9, 2) == 0xbfb0);
static_assert(model::conv_stamp(42, -1, 3, 9, 2) == 0);

// One lane (the host's path) and lanes of a CTA (the device's loop, also run here) both write
// temporal_word of every word, cut to the natural bytes.
TEST(ForwardBytes, TemporalBytesAreTemporalWordsOnEveryPath) {
  for (std::size_t size : {1u, 7u, 8u, 13u, 64u, 1001u})
    for (std::int64_t lanes : {1, 3}) {
      const model::TokenHash hash = model::mix64(size);
      std::vector<unsigned char> got(size);
      const ForwardOp op{.is_temporal = 1, .hash = hash};
      const ForwardTensor tensor{.natural_bytes = static_cast<std::int64_t>(size),
                                 .is_temporal = 1};
      for (std::int64_t lane = 0; lane < lanes; ++lane)
        forward_temporal(op, tensor, 5, 0, got.data(), lane, lanes);
      for (std::size_t b = 0; b < size; ++b)
        ASSERT_EQ(got[b], static_cast<unsigned char>(
                              model::temporal_word(hash, 5, static_cast<std::int64_t>(b / 8)) >>
                              (8 * (b % 8))))
            << "size " << size << " lanes " << lanes << " byte " << b;
    }
}

// One batch row whose table is [null, block 1, block 2] over a three-block arena of one
// temporal tensor (24 natural bytes, block stride 32) and one SD conv tensor (L 4 rows of 3
// channels, 2 bytes each, H 2), both in the same bytes of `arena` (tensor t at t * 96).
struct ReadFixture {
  std::vector<unsigned char> arena = std::vector<unsigned char>(2 * 96, 0);
  std::int32_t table[3] = {0, 1, 2};
  std::vector<ForwardTensor> tensors;
  std::vector<std::int32_t> tokens{7, 8, 9}; // positions 2, 3, 4
  std::uint64_t diffs[2] = {0, 0};
  ForwardRead read{.batch_row = 0,
                   .col = 1,
                   .conv_col = 1,
                   .num_computed = 4,
                   .token_pos0 = 2,
                   .token_offset = 0,
                   .hash = 0xabcdef};

  ReadFixture() {
    const auto base = reinterpret_cast<std::uint64_t>(arena.data());
    tensors.push_back({.base_addr = base,
                       .block_stride_bytes = 32,
                       .natural_bytes = 24,
                       .elem_size = 8,
                       .is_temporal = 1});
    tensors.push_back({.base_addr = base + 96,
                       .block_stride_bytes = 32,
                       .natural_bytes = 24,
                       .conv_dim = 3,
                       .conv_width = 4,
                       .history_rows = 2,
                       .elem_size = 2});
  }
  ForwardParams params(const std::vector<ForwardOp>& ops = {}) {
    ForwardParams p{.tensors = tensors.data(),
                    .ops = ops.data(),
                    .tokens = tokens.data(),
                    .reads = &read,
                    .read_diffs = diffs,
                    .num_tensors = 2,
                    .num_ops = static_cast<std::int32_t>(ops.size()),
                    .num_reads = 1,
                    .row_width = 3,
                    .row_stride = 3,
                    .num_blocks = 3};
    p.block_tables[0] = reinterpret_cast<std::uint64_t>(table);
    return p;
  }
  unsigned char* block(std::int32_t tensor, std::int32_t id) {
    return arena.data() + 96 * tensor + 32 * id;
  }
  // The state after 4 tokens in block `id`: the temporal state of hash 0xabcdef, and the conv
  // rows 0 and 1 holding positions 2 and 3 (tokens 7 and 8) at offset 0.
  void write_expected(std::int32_t id) {
    std::vector<std::byte> temporal(24);
    model::fill_temporal(temporal, 0xabcdef, 0);
    std::memcpy(block(0, id), temporal.data(), 24);
    for (std::int32_t r = 0; r < 2; ++r)
      for (std::int32_t ch = 0; ch < 3; ++ch)
        store_le(block(1, id) + (r * 3 + ch) * 2, model::conv_stamp(7 + r, 2 + r, 1, ch, 2), 2);
  }
  std::uint64_t diff(std::int32_t tensor) { return forward_read_diff(params(), tensor, 0, 1); }
};

TEST(ForwardBytes, ReadDiffIsZeroExactlyWhereTheExpectedStateIs) {
  ReadFixture f;
  f.write_expected(1);
  EXPECT_EQ(f.diff(0), 0u);
  EXPECT_EQ(f.diff(1), 0u);
  f.block(1, 1)[2 * 3 * 2] ^= 0xff; // conv row 2: a free row, not compared
  EXPECT_EQ(f.diff(1), 0u);
  f.block(1, 1)[1 * 3 * 2 + 1] ^= 0x10; // conv row 1, channel 0, high byte
  EXPECT_EQ(f.diff(1), 0x1000u);
  f.block(0, 1)[17] ^= 0x01; // temporal word 2, byte 1
  EXPECT_EQ(f.diff(0), 0x100u);
  f.read.col = 2; // another block: nothing written there
  f.read.conv_col = 2;
  EXPECT_NE(f.diff(0), 0u);
  EXPECT_NE(f.diff(1), 0u);
  f.table[2] = -1; // a pad slot: unreadable, a difference in bit 0
  EXPECT_EQ(f.diff(0), 1u);
  EXPECT_EQ(f.diff(1), 1u);
  f.read.col = 3; // past the row
  EXPECT_EQ(f.diff(0), 1u);
}

TEST(ForwardBytes, AWriteCarriesItsRowsReadDifference) {
  ReadFixture f;
  const ForwardOp temporal{.col = 2, .is_temporal = 1, .hash = 0x1234, .read = 0};
  const ForwardOp conv{
      .col = 2, .num_computed = 4, .running = 5, .end = 5, .token_pos0 = 2, .read = 0};
  const std::vector<ForwardOp> ops{temporal, conv};
  ForwardParams p = f.params(ops);
  for (std::int64_t program = 0; program < 4; ++program)
    forward_program(p, program, 0, 1);
  std::vector<std::byte> temporal_clean(24);
  model::fill_temporal(temporal_clean, 0x1234, 0);
  EXPECT_EQ(std::memcmp(f.block(0, 2), temporal_clean.data(), 24), 0);
  // The same writes after a read that differed in bit 3 of tensor 0 and bit 0 of tensor 1.
  f.diffs[0] = 0x8;
  f.diffs[1] = 0x1;
  for (std::int64_t program = 0; program < 4; ++program)
    forward_program(p, program, 0, 1);
  std::vector<std::byte> temporal_carried(24);
  model::fill_temporal(temporal_carried, 0x1234 ^ (model::mix64(0x8) | 1), 0);
  EXPECT_EQ(std::memcmp(f.block(0, 2), temporal_carried.data(), 24), 0);
  const std::uint64_t carry = model::mix64(0x1) | 1;
  for (std::int32_t e = 0; e < 12; ++e) { // every conv element, rows 0..3
    const std::int32_t r = e / 3;
    const std::int32_t ch = e % 3;
    const std::int64_t q = 5 - 2 + r; // positions 3, 4, 5, 6: tokens 8, 9, then none
    const std::uint64_t stamp = q < 5 ? model::conv_stamp(f.tokens[q - 2], q, 1, ch, 2) : 0;
    EXPECT_EQ(load_le(f.block(1, 2) + e * 2, 2), (stamp ^ carry) & 0xffff) << e;
  }
}

// One conv tensor of L = 4 rows (H = 3) over block 0 of its own arena, tokens at positions 0..6.
struct ConvSplit {
  std::int32_t ds = 0;
  std::int32_t elem_size = 2;
  std::int64_t dim = 3;
  std::vector<unsigned char> arena;
  std::int32_t table[1] = {0};
  std::vector<std::int32_t> tokens{11, 12, 13, 14, 15, 16, 17};
  ForwardTensor tensor;
  ForwardOp op;
  ForwardRead read;
  std::uint64_t diff = 0; // the read's difference, which a write with .read = 0 carries

  ConvSplit(std::int32_t ds_, std::int32_t elem_size_, std::int64_t dim_)
      : ds(ds_), elem_size(elem_size_), dim(dim_),
        arena(static_cast<std::size_t>(4 * dim_ * elem_size_), 0) {
    tensor = {.base_addr = reinterpret_cast<std::uint64_t>(arena.data()),
              .block_stride_bytes = static_cast<std::int64_t>(arena.size()),
              .natural_bytes = static_cast<std::int64_t>(arena.size()),
              .conv_dim = dim,
              .conv_width = 4,
              .history_rows = 3,
              .elem_size = elem_size,
              .conv_ds = ds};
  }
  ForwardParams params() {
    ForwardParams p{.tensors = &tensor,
                    .ops = &op,
                    .tokens = tokens.data(),
                    .reads = &read,
                    .read_diffs = &diff,
                    .num_tensors = 1,
                    .num_ops = 1,
                    .num_reads = 1,
                    .row_width = 1,
                    .row_stride = 1,
                    .num_blocks = 1};
    p.block_tables[0] = reinterpret_cast<std::uint64_t>(table);
    return p;
  }
  std::int64_t at(std::int64_t r, std::int64_t ch) const {
    return (ds != 0 ? ch * 4 + r : r * dim + ch) * elem_size;
  }
  // The stamp of channel ch at position q: 0 outside [0, end).
  std::uint64_t stamp(std::int64_t q, std::int64_t end, std::int64_t ch) const {
    if (q < 0 || q >= end) return 0;
    return model::conv_stamp(tokens[static_cast<std::size_t>(q)], q, 0, ch, elem_size);
  }
};

struct ConvWrite {
  std::int64_t running = 0;
  std::int64_t end = 0;
  std::uint64_t read_diff = 0; // nonzero: the write carries it
};
struct ConvRead {
  std::int32_t conv_offset = 0;
  std::int64_t num_computed = 0;
};

// Rows with tokens, rows past `end` (zeros), rows before position 0, a carried read difference;
// reads of the history at offsets 0..2 (at 2 its last row lies past the window), from before
// position 0; element sizes the host's row loops take and one they leave to the lanes' loop.
TEST(ForwardBytes, EverySplitOverLanesWritesAndReadsTheSameConvElements) {
  const ConvWrite writes[] = {{6, 7, 0}, {6, 5, 0}, {2, 7, 0}, {6, 7, 0x8}};
  const ConvRead reads[] = {{1, 5}, {2, 2}, {0, 1}};
  for (std::int32_t ds : {0, 1})
    for (std::int32_t elem_size : {2, 4, 8})
      for (std::int64_t dim : {1, 3, 10})
        for (std::int64_t lanes : {1, 2, 3, 7, 256}) {
          const std::string where = "ds " + std::to_string(ds) + " elem " +
                                    std::to_string(elem_size) + " dim " + std::to_string(dim) +
                                    " lanes " + std::to_string(lanes);
          for (const ConvWrite& w : writes) {
            ConvSplit f(ds, elem_size, dim);
            f.op = {.num_computed = static_cast<std::int32_t>(w.running),
                    .running = w.running,
                    .end = w.end,
                    .read = w.read_diff != 0 ? 0 : -1};
            f.diff = w.read_diff;
            const std::uint64_t carry = w.read_diff != 0 ? model::mix64(w.read_diff) | 1 : 0;
            ForwardParams p = f.params();
            for (std::int64_t lane = 0; lane < lanes; ++lane)
              forward_program(p, 0, lane, lanes);
            for (std::int64_t r = 0; r < 4; ++r)
              for (std::int64_t ch = 0; ch < dim; ++ch)
                ASSERT_EQ(load_le(f.arena.data() + f.at(r, ch), elem_size),
                          (f.stamp(w.running - 3 + r, w.end, ch) ^ carry) &
                              low_bytes_mask(elem_size))
                    << where << " running " << w.running << " end " << w.end << " carry " << carry
                    << " row " << r << " channel " << ch;
          }
          for (const ConvRead& rd : reads) {
            ConvSplit f(ds, elem_size, dim);
            f.read = {.conv_offset = rd.conv_offset, .num_computed = rd.num_computed};
            std::fill(f.arena.begin(), f.arena.end(), 0x5a); // rows outside the read: any bytes
            std::int64_t last_row = -1;
            for (std::int64_t k = 0; k < 3 && k + rd.conv_offset < 4; ++k) {
              last_row = k + rd.conv_offset;
              for (std::int64_t ch = 0; ch < dim; ++ch)
                store_le(f.arena.data() + f.at(last_row, ch),
                         f.stamp(rd.num_computed - 3 + k, rd.num_computed, ch), elem_size);
            }
            ForwardParams p = f.params();
            const auto read_diff = [&] {
              std::uint64_t diff = 0;
              for (std::int64_t lane = 0; lane < lanes; ++lane)
                diff |= forward_read_diff(p, 0, lane, lanes);
              return diff;
            };
            const std::string read_where = where + " offset " + std::to_string(rd.conv_offset) +
                                           " computed " + std::to_string(rd.num_computed);
            ASSERT_EQ(read_diff(), 0u) << read_where;
            // The high byte of the last element of the last row read.
            f.arena[static_cast<std::size_t>(f.at(last_row, dim - 1) + elem_size - 1)] ^= 0x40;
            EXPECT_EQ(read_diff(), std::uint64_t{0x40} << (8 * (elem_size - 1))) << read_where;
          }
        }
}

} // namespace
} // namespace mc::gpu::engine
