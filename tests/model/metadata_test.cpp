// Flattened per-(group, layer, state) metadata over several groups (REFERENCE.md 1).
#include "model/metadata.h"
#include "model/presets.h"

#include <gtest/gtest.h>

namespace mc::model {
namespace {

Layout tiny_mixed(ConvLayout conv_layout) {
  const Preset& p = find_preset("tiny-mixed");
  CacheConfig config = p.config;
  config.conv_layout = conv_layout;
  return build_layout(config, p.spec);
}

std::vector<std::uint64_t> bases(const Layout& layout, std::uint64_t first) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < layout.arenas.size(); ++i)
    out.push_back(first + i * 0x10000);
  return out;
}

TEST(Metadata, FlattensSdConvTemporalAndGroups) {
  const Layout layout = tiny_mixed(ConvLayout::SD);
  const auto metas = flatten_metadata(layout, bases(layout, 0x1000));
  ASSERT_EQ(metas.size(), 9u);
  // group 0 layer 0 conv SD (3, 8) fp16 in a 96-byte page.
  EXPECT_EQ(metas[0].base_addr, 0x1000u);
  EXPECT_EQ(metas[0].block_stride_bytes, 96);
  EXPECT_EQ(metas[0].elem_size, 2);
  EXPECT_EQ(metas[0].inner_size, 8);
  EXPECT_EQ(metas[0].conv_width, 3);
  EXPECT_EQ(metas[0].group_index, 0);
  EXPECT_EQ(metas[0].ds_row_count, 0);
  EXPECT_EQ(metas[0].ds_row_stride_bytes, 0);
  // group 0 layer 0 temporal: same page, offset 48, natural 8 elements.
  EXPECT_EQ(metas[1].base_addr, 0x1000u + 48);
  EXPECT_EQ(metas[1].inner_size, 8);
  EXPECT_EQ(metas[1].conv_width, 0);
  // group 0 layer 1 in the next arena.
  EXPECT_EQ(metas[2].base_addr, 0x11000u);
  // group 1: short_conv (2, 5) fp64.
  EXPECT_EQ(metas[4].group_index, 1);
  EXPECT_EQ(metas[4].base_addr, 0x21000u);
  EXPECT_EQ(metas[4].inner_size, 5);
  EXPECT_EQ(metas[4].conv_width, 2);
  EXPECT_EQ(metas[4].elem_size, 8);
  // group 2: kda recurrent (1, 3, 3) fp16, separate arena, stride 32.
  EXPECT_EQ(metas[8].group_index, 2);
  EXPECT_EQ(metas[8].inner_size, 9);
  EXPECT_EQ(metas[8].block_stride_bytes, 32);
  EXPECT_EQ(metas[8].conv_width, 0);
}

TEST(Metadata, DsConvHasRowsAndUnsignedHighAddresses) {
  const Layout layout = tiny_mixed(ConvLayout::DS);
  const std::uint64_t high = 0x8000'0000'0000'0000ull; // negative if read as signed
  const auto metas = flatten_metadata(layout, bases(layout, high));
  EXPECT_EQ(metas[0].base_addr, high);
  EXPECT_EQ(metas[0].inner_size, 1);
  EXPECT_EQ(metas[0].conv_width, 3);
  EXPECT_EQ(metas[0].ds_row_count, 8);
  EXPECT_EQ(metas[0].ds_row_stride_bytes, 6);
  EXPECT_EQ(metas[1].ds_row_count, 0); // temporal keeps the single-region path
  EXPECT_EQ(metas[4].ds_row_count, 5);
  EXPECT_EQ(metas[4].ds_row_stride_bytes, 16);
}

} // namespace
} // namespace mc::model
