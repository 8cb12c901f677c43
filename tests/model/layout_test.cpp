// Layouts: page sharing, padding and strides, worked out by hand.
#include "model/errors.h"
#include "model/layout.h"
#include "model/presets.h"

#include <gtest/gtest.h>

namespace mc::model {
namespace {

Layout tiny_mixed(ConvLayout conv_layout = ConvLayout::SD) {
  const Preset& p = find_preset("tiny-mixed");
  CacheConfig config = p.config;
  config.conv_layout = conv_layout;
  return build_layout(config, p.spec);
}

TEST(Layout, SharedPagePlacesStatesAtOffsetsWithPaddedStride) {
  const Layout layout = tiny_mixed();
  ASSERT_EQ(layout.tensors.size(), 9u);
  ASSERT_EQ(layout.arenas.size(), 7u);
  // mamba2: conv (3, 8) fp16 = 48 bytes at 0; temporal (2, 2, 2) fp32 = 32 bytes at 48;
  // 80 bytes rounded up to the 96-byte page.
  const StateTensor& conv = layout.tensors[0];
  const StateTensor& temporal = layout.tensors[1];
  EXPECT_EQ(conv.shape.dims, (std::vector<std::int64_t>{3, 8}));
  EXPECT_EQ(conv.natural_bytes, 48);
  EXPECT_EQ(conv.offset_bytes, 0);
  EXPECT_EQ(conv.block_stride_bytes, 96);
  EXPECT_EQ(temporal.natural_bytes, 32);
  EXPECT_EQ(temporal.offset_bytes, 48);
  EXPECT_EQ(temporal.block_stride_bytes, 96);
  EXPECT_EQ(conv.arena, temporal.arena);
  EXPECT_EQ(layout.tensors[2].layer, 1);
  EXPECT_NE(layout.tensors[2].arena, conv.arena);
  EXPECT_EQ(temporal.block_offset_bytes(5), 48 + 5 * 96);
}

TEST(Layout, SeparateTensorsRoundTheirStrideUp) {
  const Layout layout = tiny_mixed();
  // short_conv (2, 5) fp64 = 80 bytes, page 80.
  const StateTensor& sc = layout.tensors[4];
  EXPECT_EQ(sc.group, 1);
  EXPECT_EQ(sc.natural_bytes, 80);
  EXPECT_EQ(sc.block_stride_bytes, 80);
  // kda: three conv (1, 3) fp32 = 12 bytes -> 16; recurrent (1, 3, 3) fp16 = 18 -> 32.
  for (int s = 0; s < 3; ++s) {
    const StateTensor& c = layout.tensors[static_cast<std::size_t>(5 + s)];
    EXPECT_EQ(c.group, 2);
    EXPECT_EQ(c.state, s);
    EXPECT_EQ(c.natural_bytes, 12);
    EXPECT_EQ(c.block_stride_bytes, 16);
  }
  EXPECT_EQ(layout.tensors[8].natural_bytes, 18);
  EXPECT_EQ(layout.tensors[8].block_stride_bytes, 32);
  EXPECT_EQ(layout.total_bytes(), 32 * (96 + 96 + 80 + 16 * 3 + 32));
}

TEST(Layout, DsConvTransposesTheBlockShape) {
  const Layout layout = tiny_mixed(ConvLayout::DS);
  EXPECT_EQ(layout.tensors[0].shape.dims, (std::vector<std::int64_t>{8, 3}));
  EXPECT_EQ(layout.tensors[0].natural_bytes, 48);
}

TEST(Layout, RejectsImpossibleSpecs) {
  const Preset& p = find_preset("tiny-mamba2");
  LayoutSpec spec = p.spec;
  spec.groups[0].conv_elem_size = 3;
  EXPECT_THROW(build_layout(p.config, spec), InputError);
  spec = p.spec;
  spec.groups[0].num_layers = 0;
  EXPECT_THROW(build_layout(p.config, spec), InputError);
  spec = p.spec;
  spec.num_blocks = 1;
  EXPECT_THROW(build_layout(p.config, spec), InputError);
  CacheConfig config = p.config;
  config.mamba_block_size = 0;
  EXPECT_THROW(build_layout(config, p.spec), InputError);
  config = p.config;
  config.num_spec_blocks = 1; // align mode needs nsb == num_spec
  EXPECT_THROW(build_layout(config, p.spec), InputError);
  EXPECT_THROW(find_preset("no-such-model"), InputError);
}

// --layers of run, replay and scenario: every group keeps at most N layers, the rest of the
// layout as it was; 0 keeps all, and N outside 1..kLayersMax is refused before anything is cut.
TEST(Layout, CapLayersKeepsTheFirstLayersOfEveryGroup) {
  LayoutSpec spec{.groups = {GroupSpec{.name = "a", .num_layers = 5},
                             GroupSpec{.name = "b", .num_layers = 2}},
                  .num_blocks = 9};
  EXPECT_EQ(cap_layers(spec, 0), 5);
  EXPECT_EQ(spec.groups[0].num_layers, 5);
  EXPECT_EQ(cap_layers(spec, 3), 5);
  EXPECT_EQ(spec.groups[0].num_layers, 3);
  EXPECT_EQ(spec.groups[1].num_layers, 2);
  EXPECT_EQ(spec.num_blocks, 9);
  EXPECT_EQ(cap_layers(spec, 1), 3);
  EXPECT_EQ(spec.groups[0].num_layers, 1);
  EXPECT_EQ(spec.groups[1].num_layers, 1);
  EXPECT_THROW(cap_layers(spec, -1), InputError);
  EXPECT_THROW(cap_layers(spec, kLayersMax + 1), InputError);
  EXPECT_EQ(spec.groups[0].num_layers, 1);
  EXPECT_EQ(cap_layers(spec, kLayersMax), 1);
}

TEST(Layout, EveryPresetBuilds) {
  for (const Preset& p : all_presets()) {
    SCOPED_TRACE(p.name);
    const Layout layout = build_layout(p.config, p.spec);
    EXPECT_FALSE(layout.tensors.empty());
    for (const StateTensor& t : layout.tensors) {
      EXPECT_GE(t.block_stride_bytes, t.natural_bytes);
      EXPECT_EQ(t.block_stride_bytes % t.elem_size, 0);
      EXPECT_EQ(t.offset_bytes % t.elem_size, 0);
    }
  }
}

} // namespace
} // namespace mc::model
