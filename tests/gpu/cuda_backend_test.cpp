// The cuda backend against the host backend on the same cases: every arena byte, every
// per-request array and every decision must match. Skipped (never passed) without a GPU.
#include "gpu/cuda_backend.h"
#include "gpu/host_backend.h"
#include "model/errors.h"
#include "model/presets.h"
#include "tests/gpu/random_cases.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace mc::gpu {
namespace {

using model::LaunchKind;

#define MC_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or built without CUDA)";               \
  } while (0)

void expect_same_result(const model::LaunchCase& c) {
  const model::LaunchResult want = run_launch_host(c);
  const model::LaunchResult got = run_launch_cuda(c);
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.unsupported_reason, want.unsupported_reason);
  EXPECT_EQ(got.requests, want.requests);
  EXPECT_EQ(got.decisions.size(), want.decisions.size());
  EXPECT_TRUE(got.decisions == want.decisions);
  ASSERT_EQ(got.arenas.size(), want.arenas.size());
  for (std::size_t i = 0; i < got.arenas.size(); ++i)
    EXPECT_EQ(got.arenas[i].first_difference(want.arenas[i]), -1) << "arena " << i;
}

model::Layout preset_layout(std::string_view name, model::ConvLayout conv_layout,
                            std::int64_t num_blocks, std::int32_t layers_max = 1024) {
  const model::Preset& p = model::find_preset(name);
  model::CacheConfig config = p.config;
  config.conv_layout = conv_layout;
  model::LayoutSpec spec = p.spec;
  spec.num_blocks = num_blocks;
  for (model::GroupSpec& g : spec.groups)
    g.num_layers = std::min(g.num_layers, layers_max);
  return model::build_layout(config, spec);
}

struct KindCase {
  LaunchKind kind;
  model::ConvLayout conv_layout;
};

class CudaVsHost : public ::testing::TestWithParam<KindCase> {};

TEST_P(CudaVsHost, TinyPresetsRandomCases) {
  MC_REQUIRE_GPU();
  for (const model::Preset& p : model::all_presets()) {
    if (!p.tiny) continue;
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(p.name + " seed " + std::to_string(seed));
      const std::int32_t reqs = static_cast<std::int32_t>(seed * 37 % 300);
      model::Layout layout = preset_layout(p.name, GetParam().conv_layout, 1 + reqs * 6);
      expect_same_result(test::random_case(std::move(layout), GetParam().kind, reqs, seed));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, CudaVsHost,
    ::testing::Values(KindCase{LaunchKind::postprocess, model::ConvLayout::SD},
                      KindCase{LaunchKind::postprocess, model::ConvLayout::DS},
                      KindCase{LaunchKind::postprocess_align, model::ConvLayout::SD},
                      KindCase{LaunchKind::postprocess_align, model::ConvLayout::DS},
                      KindCase{LaunchKind::precopy, model::ConvLayout::SD},
                      KindCase{LaunchKind::precopy, model::ConvLayout::DS},
                      KindCase{LaunchKind::preprocess_align, model::ConvLayout::SD},
                      KindCase{LaunchKind::batch_copy, model::ConvLayout::SD},
                      KindCase{LaunchKind::batch_copy, model::ConvLayout::DS},
                      KindCase{LaunchKind::precopy_v1, model::ConvLayout::SD},
                      KindCase{LaunchKind::precopy_v1, model::ConvLayout::DS},
                      KindCase{LaunchKind::postprocess_align_slot_tables, model::ConvLayout::SD},
                      KindCase{LaunchKind::postprocess_align_slot_tables, model::ConvLayout::DS},
                      KindCase{LaunchKind::precopy_slot_tables, model::ConvLayout::SD},
                      KindCase{LaunchKind::precopy_slot_tables, model::ConvLayout::DS}),
    [](const ::testing::TestParamInfo<KindCase>& param_info) {
      return std::string(model::to_string(param_info.param.kind)) + "_" +
             std::string(model::to_string(param_info.param.conv_layout));
    });

// 64 mamba2 layers (2 states each) x 256 requests, every kind with copies.
TEST(CudaVsHostGrid, SixtyFourLayersTwoStatesTwoHundredFiftySixRequests) {
  MC_REQUIRE_GPU();
  for (const LaunchKind kind :
       {LaunchKind::postprocess, LaunchKind::postprocess_align, LaunchKind::precopy,
        LaunchKind::batch_copy, LaunchKind::precopy_v1, LaunchKind::postprocess_align_slot_tables,
        LaunchKind::precopy_slot_tables}) {
    SCOPED_TRACE(std::string(model::to_string(kind)));
    model::Layout layout = test::make_layout({test::group_spec(model::Family::mamba2,
                                                               {.intermediate_size = 64,
                                                                .n_groups = 1,
                                                                .num_heads = 4,
                                                                .head_dim = 8,
                                                                .state_size = 16,
                                                                .conv_kernel = 4},
                                                               64, 2, 4)},
                                             1 + 256 * test::kRandomRowWidth);
    expect_same_result(test::random_case(std::move(layout), kind, 256, 99));
  }
}

// A production-sized state (Qwen3-Next GDN: 64 KiB+ temporal) across many CTAs and units.
TEST(CudaVsHostGrid, ProductionStatesManyUnits) {
  MC_REQUIRE_GPU();
  for (const auto conv_layout : {model::ConvLayout::SD, model::ConvLayout::DS}) {
    model::Layout layout = preset_layout("qwen3-next-80b", conv_layout, 1 + 12 * 6, 2);
    expect_same_result(test::random_case(std::move(layout), LaunchKind::postprocess_align, 12, 7));
  }
}

// 5 GiB arena: a real copy between blocks past 2^32 bytes.
TEST(CudaVsHostGrid, ArenaPastFourGiB) {
  MC_REQUIRE_GPU();
  const model::Layout layout =
      test::make_layout({test::group_spec(model::Family::linear_attention,
                                          {.num_heads = 4, .head_dim = 256}, 1, 2, 4)},
                        5000);
  model::LaunchCase c;
  c.layout = layout;
  c.kind = LaunchKind::precopy;
  c.num_reqs = c.num_slots = 2;
  c.arenas.emplace_back(layout.arenas[0].size_bytes());
  const std::int64_t block = std::int64_t{1} << 20;
  for (const std::int64_t b : {4500, 4100, 4999, 3, 4097})
    c.arenas[0].poison_range(b * block, block);
  c.block_tables.groups.push_back(model::BlockTable::make(2, 3, 4));
  test::set_row(c, 0, {4500, 7, 4999});
  test::set_row(c, 1, {3, 4097, 4100});
  c.requests = {
      .idx_mapping = {1, 0}, .state_idx = {2, 2}, .src_col = {0, 0}, .token_bias = {1, 0}};
  expect_same_result(c);
}

// What the backend says about the machine agrees with what it does: with a device it counts one
// or more, selects device 0 and runs a launch there; without one every entry point says so.
TEST(CudaBackend, ReportsAvailability) {
  const std::optional<int> devices = cuda_device_count();
#ifdef MC_HAVE_CUDA
  ASSERT_TRUE(devices.has_value()) << "a CUDA build counts its devices";
  EXPECT_EQ(cuda_available(), *devices > 0);
#else
  EXPECT_FALSE(devices.has_value()) << "a build without CUDA cannot count devices";
  EXPECT_FALSE(cuda_available());
#endif
  if (!cuda_available()) {
    EXPECT_THROW(run_launch_cuda(model::LaunchCase{}), model::EnvironmentError);
    EXPECT_THROW(use_cuda_device(0), model::EnvironmentError);
    EXPECT_FALSE(cuda_context_usable());
    GTEST_SKIP() << "no CUDA device: checked that the backend says so (device count "
                 << (devices ? std::to_string(*devices) : std::string("unknown"))
                 << ", run_launch_cuda and use_cuda_device throw EnvironmentError)";
  }
  ASSERT_GE(*devices, 1);
  use_cuda_device(0);
  EXPECT_TRUE(cuda_context_usable());
  model::Layout layout = preset_layout("tiny-mamba2", model::ConvLayout::SD, 1 + 8 * 6);
  const model::LaunchCase c =
      test::random_case(std::move(layout), LaunchKind::postprocess_align, 8, 3);
  const model::LaunchResult got = run_launch_cuda(c);
  EXPECT_EQ(got.status, model::LaunchStatus::ok);
  EXPECT_FALSE(got.decisions.empty()) << "a launch that copies nothing shows no device work";
  expect_same_result(c);
  EXPECT_TRUE(cuda_context_usable());
}

} // namespace
} // namespace mc::gpu
