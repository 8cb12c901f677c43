#include "model/presets.h"

#include "model/errors.h"

#include <fmt/format.h>

namespace mc::model {
namespace {

GroupSpec group(std::string name, Family family, FamilyParams params, std::int32_t num_layers,
                std::int32_t conv_elem_size, std::int32_t temporal_elem_size,
                PagePolicy policy = PagePolicy::shared, std::int64_t page_align_bytes = 1) {
  return GroupSpec{.name = std::move(name),
                   .family = family,
                   .params = params,
                   .num_layers = num_layers,
                   .conv_elem_size = conv_elem_size,
                   .temporal_elem_size = temporal_elem_size,
                   .page_policy = policy,
                   .page_align_bytes = page_align_bytes};
}

CacheConfig production_config() {
  return CacheConfig{.mamba_block_size = 256, .attn_block_size = 16, .num_spec_tokens = 2,
                     .num_spec_blocks = 2};
}

CacheConfig tiny_config() {
  return CacheConfig{.mamba_block_size = 4, .attn_block_size = 2, .num_spec_tokens = 2,
                     .num_spec_blocks = 2};
}

std::vector<Preset> make_presets() {
  std::vector<Preset> p;
  // Mamba-2 2.7B: d_model 2560, expand 2 (intermediate 5120), head_dim 64 (80 heads),
  // d_state 128, n_groups 1, conv kernel 4, 64 layers; bf16 conv, fp32 SSM state.
  p.push_back({"mamba2-2.7b", "Mamba-2 2.7B: 64 mamba2 layers", production_config(),
               {{group("mamba", Family::mamba2,
                       {.intermediate_size = 5120, .n_groups = 1, .num_heads = 80, .head_dim = 64,
                        .state_size = 128, .conv_kernel = 4},
                       64, 2, 4)},
                64}});
  // Nemotron-H 8B: 24 mamba2 layers (of 52), intermediate 8192, 128 heads of 64,
  // d_state 128, n_groups 8, conv kernel 4; bf16 states.
  p.push_back({"nemotron-h-8b", "Nemotron-H 8B: 24 mamba2 layers, 8 groups", production_config(),
               {{group("mamba", Family::mamba2,
                       {.intermediate_size = 8192, .n_groups = 8, .num_heads = 128, .head_dim = 64,
                        .state_size = 128, .conv_kernel = 4},
                       24, 2, 2)},
                64}});
  // Qwen3-Next 80B-A3B: 36 gated delta net layers (of 48), 16 key heads and 32 value
  // heads of 128, conv kernel 4; bf16 conv, fp32 recurrent state.
  p.push_back({"qwen3-next-80b", "Qwen3-Next 80B: 36 gated_delta_net layers", production_config(),
               {{group("gdn", Family::gated_delta_net,
                       {.conv_kernel = 4, .num_k_heads = 16, .num_v_heads = 32, .head_k_dim = 128,
                        .head_v_dim = 128},
                       36, 2, 4)},
                64}});
  // Kimi Linear 48B: 20 KDA layers (of 27), 32 heads of 128, conv kernel 4; fp32 state.
  p.push_back({"kimi-linear-48b", "Kimi Linear 48B: 20 kda layers (4 states each)",
               production_config(),
               {{group("kda", Family::kda, {.num_heads = 32, .head_dim = 128, .conv_kernel = 4},
                       20, 2, 4)},
                64}});
  // Falcon Mamba 7B: 64 mamba1 layers, intermediate 8192, d_state 16, conv kernel 4.
  p.push_back({"falcon-mamba-7b", "Falcon Mamba 7B: 64 mamba1 layers", production_config(),
               {{group("mamba", Family::mamba1,
                       {.intermediate_size = 8192, .state_size = 16, .conv_kernel = 4}, 64, 2, 4)},
                64}});
  // LFM2 1.2B: 10 short-conv layers, hidden 2048, conv cache length 3 (kernel 3).
  p.push_back({"lfm2-1.2b", "LFM2 1.2B: 10 short_conv layers", production_config(),
               {{group("conv", Family::short_conv, {.intermediate_size = 2048, .conv_kernel = 3},
                       10, 2, 2)},
                64}});
  // MiniMax-Text-01: 70 lightning (linear) attention layers of 64 heads of 128.
  p.push_back({"minimax-text-01", "MiniMax-Text-01: 70 linear_attention layers",
               production_config(),
               {{group("linear", Family::linear_attention, {.num_heads = 64, .head_dim = 128}, 70,
                       2, 4)},
                64}});
  // A hybrid of two mamba groups with different state tuples (GDN 2 states, short
  // conv 1), pages padded to 4 KiB as an attention page would force.
  p.push_back({"hybrid-gdn-conv", "two groups: 24 gated_delta_net + 8 short_conv, padded pages",
               production_config(),
               {{group("gdn", Family::gated_delta_net,
                       {.conv_kernel = 4, .num_k_heads = 16, .num_v_heads = 32, .head_k_dim = 128,
                        .head_v_dim = 128},
                       24, 2, 4, PagePolicy::shared, 4096),
                 group("conv", Family::short_conv, {.intermediate_size = 2048, .conv_kernel = 4},
                       8, 2, 2, PagePolicy::shared, 4096)},
                64}});

  // Tiny presets: a few bytes per state so every byte can be checked and shrinking is fast.
  p.push_back({"tiny-mamba2", "tiny mamba2: 2 layers, 2x8 conv, 2x2x4 temporal", tiny_config(),
               {{group("mamba", Family::mamba2,
                       {.intermediate_size = 4, .n_groups = 1, .num_heads = 2, .head_dim = 2,
                        .state_size = 2, .conv_kernel = 2},
                       2, 2, 4)},
                32},
               true});
  p.push_back({"tiny-mamba1", "tiny mamba1: 2 layers", tiny_config(),
               {{group("mamba", Family::mamba1,
                       {.intermediate_size = 4, .state_size = 2, .conv_kernel = 3}, 2, 4, 4)},
                32},
               true});
  p.push_back({"tiny-gdn", "tiny gated_delta_net: 2 layers, separate padded tensors",
               tiny_config(),
               {{group("gdn", Family::gated_delta_net,
                       {.conv_kernel = 3, .num_k_heads = 1, .num_v_heads = 2, .head_k_dim = 2,
                        .head_v_dim = 2},
                       2, 2, 8, PagePolicy::separate, 64)},
                32},
               true});
  p.push_back({"tiny-kda", "tiny kda: 1 layer, 4 states", tiny_config(),
               {{group("kda", Family::kda, {.num_heads = 2, .head_dim = 2, .conv_kernel = 3}, 1, 2,
                       4)},
                32},
               true});
  p.push_back({"tiny-short-conv", "tiny short_conv: 3 layers", tiny_config(),
               {{group("conv", Family::short_conv, {.intermediate_size = 3, .conv_kernel = 4}, 3,
                       2, 2)},
                32},
               true});
  p.push_back({"tiny-linear", "tiny linear_attention: 2 layers", tiny_config(),
               {{group("linear", Family::linear_attention, {.num_heads = 2, .head_dim = 2}, 2, 2,
                       8)},
                32},
               true});
  p.push_back({"tiny-mixed", "tiny: three groups (mamba2, short_conv, kda), padded shared pages",
               tiny_config(),
               {{group("mamba", Family::mamba2,
                       {.intermediate_size = 4, .n_groups = 1, .num_heads = 2, .head_dim = 2,
                        .state_size = 2, .conv_kernel = 2},
                       2, 2, 4, PagePolicy::shared, 96),
                 group("conv", Family::short_conv, {.intermediate_size = 5, .conv_kernel = 3}, 1,
                       8, 8, PagePolicy::shared, 8),
                 group("kda", Family::kda, {.num_heads = 1, .head_dim = 3, .conv_kernel = 2}, 1, 4,
                       2, PagePolicy::separate, 16)},
                32},
               true});
  return p;
}

} // namespace

const std::vector<Preset>& all_presets() {
  static const std::vector<Preset> presets = make_presets();
  return presets;
}

const Preset& find_preset(std::string_view name) {
  std::string known;
  for (const Preset& p : all_presets()) {
    if (p.name == name) return p;
    known += known.empty() ? p.name : ", " + p.name;
  }
  fail_input("preset: unknown preset '{}' (known: {})", name, known);
}

} // namespace mc::model
