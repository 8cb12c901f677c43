// Shape calculator against values worked out by hand from seed 001.
#include "model/errors.h"
#include "model/shapes.h"

#include <gtest/gtest.h>

namespace mc::model {
namespace {

using Dims = std::vector<std::int64_t>;

std::vector<Dims> dims_of(Family f, const FamilyParams& p, int tp, int num_spec, ConvLayout l) {
  std::vector<Dims> out;
  for (const StateShape& s : state_shapes(f, p, tp, num_spec, l))
    out.push_back(s.dims);
  return out;
}

const FamilyParams kMamba1{.intermediate_size = 8192, .state_size = 16, .conv_kernel = 4};
const FamilyParams kMamba2{.intermediate_size = 5120,
                           .n_groups = 1,
                           .num_heads = 80,
                           .head_dim = 64,
                           .state_size = 128,
                           .conv_kernel = 4};
const FamilyParams kNemotron{.intermediate_size = 8192,
                             .n_groups = 8,
                             .num_heads = 128,
                             .head_dim = 64,
                             .state_size = 128,
                             .conv_kernel = 4};
const FamilyParams kGdn{
    .conv_kernel = 4, .num_k_heads = 16, .num_v_heads = 32, .head_k_dim = 128, .head_v_dim = 128};
const FamilyParams kKda{.num_heads = 32, .head_dim = 128, .conv_kernel = 4};

TEST(Shapes, Mamba1IgnoresNumSpec) {
  EXPECT_EQ(dims_of(Family::mamba1, kMamba1, 1, 0, ConvLayout::SD),
            (std::vector<Dims>{{3, 8192}, {8192, 16}}));
  EXPECT_EQ(dims_of(Family::mamba1, kMamba1, 2, 3, ConvLayout::SD),
            (std::vector<Dims>{{3, 4096}, {4096, 16}}));
  EXPECT_EQ(dims_of(Family::mamba1, kMamba1, 2, 3, ConvLayout::DS),
            (std::vector<Dims>{{4096, 3}, {4096, 16}}));
}

TEST(Shapes, Mamba2SingleGroupIsReplicatedPerHeadShard) {
  // tp 1: conv_dim = 5120 + 2*1*128 = 5376.
  EXPECT_EQ(dims_of(Family::mamba2, kMamba2, 1, 0, ConvLayout::SD),
            (std::vector<Dims>{{3, 5376}, {80, 64, 128}}));
  // tp 2: n_groups 1 -> 2 (extra 1), conv_dim = 5120 + 512 = 5632, /2 = 2816; K-1+2 = 5.
  EXPECT_EQ(dims_of(Family::mamba2, kMamba2, 2, 2, ConvLayout::SD),
            (std::vector<Dims>{{5, 2816}, {40, 64, 128}}));
  // tp 4: n_groups 1 -> 4, conv_dim = 5120 + 1024 = 6144, /4 = 1536.
  EXPECT_EQ(dims_of(Family::mamba2, kMamba2, 4, 1, ConvLayout::DS),
            (std::vector<Dims>{{1536, 4}, {20, 64, 128}}));
  EXPECT_EQ(extra_groups_for_head_shards(1, 4), 3);
  EXPECT_EQ(extra_groups_for_head_shards(8, 4), 0);
}

TEST(Shapes, Mamba2DivisibleGroupsNeedNoExtra) {
  // n_groups 8, tp 4: conv_dim = 8192 + 2*8*128 = 10240, /4 = 2560.
  EXPECT_EQ(dims_of(Family::mamba2, kNemotron, 4, 0, ConvLayout::SD),
            (std::vector<Dims>{{3, 2560}, {32, 64, 128}}));
}

TEST(Shapes, GatedDeltaNet) {
  // conv_dim = 128*16*2 + 128*32 = 8192.
  EXPECT_EQ(dims_of(Family::gated_delta_net, kGdn, 1, 0, ConvLayout::SD),
            (std::vector<Dims>{{3, 8192}, {32, 128, 128}}));
  EXPECT_EQ(dims_of(Family::gated_delta_net, kGdn, 2, 2, ConvLayout::SD),
            (std::vector<Dims>{{5, 4096}, {16, 128, 128}}));
  EXPECT_EQ(dims_of(Family::gated_delta_net, kGdn, 2, 2, ConvLayout::DS),
            (std::vector<Dims>{{4096, 5}, {16, 128, 128}}));
}

TEST(Shapes, KdaHasFourStatesAndNoSpecInConvLength) {
  EXPECT_EQ(dims_of(Family::kda, kKda, 1, 2, ConvLayout::SD),
            (std::vector<Dims>{{3, 4096}, {3, 4096}, {3, 4096}, {32, 128, 128}}));
  EXPECT_EQ(dims_of(Family::kda, kKda, 4, 0, ConvLayout::DS),
            (std::vector<Dims>{{1024, 3}, {1024, 3}, {1024, 3}, {8, 128, 128}}));
  const auto shapes = state_shapes(Family::kda, kKda, 1, 0, ConvLayout::SD);
  EXPECT_EQ(shapes[0].kind, StateKind::conv);
  EXPECT_EQ(shapes[3].kind, StateKind::temporal);
}

TEST(Shapes, ShortConvAndLinearAttention) {
  const FamilyParams conv{.intermediate_size = 2048, .conv_kernel = 3};
  EXPECT_EQ(dims_of(Family::short_conv, conv, 1, 2, ConvLayout::SD),
            (std::vector<Dims>{{2, 2048}}));
  EXPECT_EQ(dims_of(Family::short_conv, conv, 2, 0, ConvLayout::DS),
            (std::vector<Dims>{{1024, 2}}));
  const FamilyParams lin{.num_heads = 64, .head_dim = 128};
  EXPECT_EQ(dims_of(Family::linear_attention, lin, 1, 0, ConvLayout::SD),
            (std::vector<Dims>{{64, 128, 128}}));
  // Seed 001 floors here instead of requiring divisibility: 64 // 3 = 21.
  EXPECT_EQ(dims_of(Family::linear_attention, lin, 3, 0, ConvLayout::SD),
            (std::vector<Dims>{{21, 128, 128}}));
}

TEST(Shapes, ImpossibleConfigsAreInputErrors) {
  EXPECT_THROW(state_shapes(Family::mamba1, kMamba1, 3, 0, ConvLayout::SD), InputError);
  EXPECT_THROW(state_shapes(Family::gated_delta_net, kGdn, 3, 0, ConvLayout::SD), InputError);
  EXPECT_THROW(state_shapes(Family::mamba2, kMamba2, 3, 0, ConvLayout::SD), InputError);
  EXPECT_THROW(state_shapes(Family::mamba1, kMamba1, 0, 0, ConvLayout::SD), InputError);
  EXPECT_THROW(state_shapes(Family::mamba2, FamilyParams{}, 1, 0, ConvLayout::SD), InputError);
  // K = 1 leaves a conv window of zero tokens without drafts.
  EXPECT_THROW(state_shapes(Family::short_conv, {.intermediate_size = 4, .conv_kernel = 1}, 1, 0,
                            ConvLayout::SD),
               InputError);
}

} // namespace
} // namespace mc::model
