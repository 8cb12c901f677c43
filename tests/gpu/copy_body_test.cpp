// The copy bodies under the host backend: vector heads and tails at odd offsets, multi-unit
// copies, 64-bit and unsigned address arithmetic, and an arena past 4 GiB.
#include "gpu/host_backend.h"
#include "gpu/kernels/byte_copy.cuh"
#include "gpu/kernels/state_copy.cuh"
#include "tests/gpu/case_helpers.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mc::gpu {
namespace {

using model::LaunchKind;
using test::expect_move;
using test::expect_same_arena;

// kda, 1 head of 129, K 2: three conv states of 1 x 129 fp16 (258 bytes each) then the
// recurrent state 129 x 129 fp16 = 33282 bytes (two work units) at page offset 774
// (= 6 mod 16); the page is 34056 bytes (= 8 mod 16), so block parity changes congruence.
model::Layout odd_offset_kda() {
  return test::make_layout(
      {test::group_spec(model::Family::kda, {.num_heads = 1, .head_dim = 129, .conv_kernel = 2}, 1,
                        2, 2)},
      8);
}

TEST(CopyBody, OddOffsetsUseVectorsWithHeadAndTailAndStayExact) {
  const model::Layout layout = odd_offset_kda();
  ASSERT_EQ(layout.tensors[3].offset_bytes, 774);
  ASSERT_EQ(layout.tensors[3].block_stride_bytes, 34056);
  model::LaunchCase c = test::make_case(layout, LaunchKind::precopy, 2, 2, 2);
  test::set_row(c, 0, {1, 2}); // 1 -> 2: src and dst differ by 8 mod 16 (8-byte units)
  test::set_row(c, 1, {4, 6}); // 4 -> 6: congruent mod 16, dst at 6 mod 16 (10-byte head)
  c.requests.idx_mapping = {0, 1};
  c.requests.src_col = {0, 0};
  c.requests.state_idx = {1, 1};
  c.requests.token_bias = {0, 0};
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.decisions.size(), 8u);
  EXPECT_EQ(r.decisions[3].bytes, 33282);
  model::Arena expected = c.arenas[0].clone();
  for (const auto& [src, dst] : {std::pair{1, 2}, std::pair{4, 6}})
    expect_move(expected, c.arenas[0], dst * 34056, src * 34056, 774 + 33282);
  expect_same_arena(r.arenas[0], expected);
}

// Flat copies of every length 0..80 at every relative alignment, left shifts included.
TEST(CopyBody, FlatCopyAndMoveMatchMemmoveForAllSmallShapes) {
  std::vector<std::uint8_t> before(256);
  std::iota(before.begin(), before.end(), std::uint8_t{1});
  for (std::int64_t dst = 0; dst < 20; ++dst)
    for (std::int64_t src = dst; src < dst + 20; ++src)
      for (std::int64_t n = 0; n <= 80; ++n) {
        std::vector<std::uint8_t> got = before;
        std::vector<std::uint8_t> want = before;
        std::memmove(want.data() + dst, want.data() + src, static_cast<std::size_t>(n));
        const auto base = reinterpret_cast<std::uint64_t>(got.data());
        copy_flat_chunk(HostTeam{}, base + static_cast<std::uint64_t>(dst),
                        base + static_cast<std::uint64_t>(src), n, 0, kUnitBytes);
        ASSERT_EQ(got, want) << "dst " << dst << " src " << src << " bytes " << n;
      }
}

TEST(CopyBody, AddressesAreSixtyFourBitAndUnsigned) {
  TensorDesc t;
  t.kind = TensorKind::temporal;
  t.base_addr = 0xF000'0000'0000'0010ull; // >= 2^63: negative if read as signed
  t.block_stride_bytes = std::int64_t{1} << 22;
  t.natural_bytes = 100;
  const GroupBlocks blocks{.conv_src = 0, .temporal_src = 0x3FFF'FFFF, .dst = 0x2000'0001};
  const CopyGeometry g = state_copy_geometry<Clean>(t, blocks, 0);
  EXPECT_EQ(g.src_addr, 0xF000'0000'0000'0010ull + (0x3FFF'FFFFull << 22));
  EXPECT_EQ(g.dst_addr, 0xF000'0000'0000'0010ull + (0x2000'0001ull << 22));
  EXPECT_EQ(g.bytes, 100);
  t.kind = TensorKind::conv_sd;
  t.conv_width = 5;
  t.token_row_bytes = 10752;
  const CopyGeometry sd = state_copy_geometry<Clean>(t, blocks, 2);
  EXPECT_EQ(sd.src_addr, 0xF000'0000'0000'0010ull + 2 * 10752);
  EXPECT_EQ(sd.bytes, 3 * 10752);
}

// linear_attention 4 x 256 x 256 fp32: 1 MiB per block, 5000 blocks: a 5 GiB arena, and
// blocks past 4096 sit past 2^32 bytes.
TEST(CopyBody, ArenaPastFourGiB) {
  const model::Layout layout =
      test::make_layout({test::group_spec(model::Family::linear_attention,
                                          {.num_heads = 4, .head_dim = 256}, 1, 2, 4)},
                        5000);
  model::LaunchCase c;
  c.layout = layout;
  c.kind = LaunchKind::precopy;
  c.num_reqs = c.num_slots = 1;
  c.arenas.emplace_back(layout.arenas[0].size_bytes());
  const std::int64_t block = std::int64_t{1} << 20;
  c.arenas[0].poison_range(4500 * block, block);
  c.arenas[0].poison_range(4999 * block - 4096, block + 4096);
  c.block_tables.groups.push_back(model::BlockTable::make(1, 3, 3));
  test::set_row(c, 0, {4500, 7, 4999});
  c.requests = {.idx_mapping = {0}, .state_idx = {2}, .src_col = {0}, .token_bias = {0}};
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.decisions.size(), 1u);
  model::Arena expected = c.arenas[0].clone();
  expect_move(expected, c.arenas[0], 4999 * block, 4500 * block, block);
  expect_same_arena(r.arenas[0], expected);
}

} // namespace
} // namespace mc::gpu
