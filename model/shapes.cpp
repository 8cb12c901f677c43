#include "model/shapes.h"

#include "model/errors.h"

namespace mc::model {
namespace {

// vLLM's divide(): exact division or the config is impossible.
std::int64_t divide(std::int64_t numerator, std::int64_t denominator, std::string_view what) {
  if (numerator % denominator != 0)
    fail_input("layout: tp size {} does not divide {} ({})", denominator, what, numerator);
  return numerator / denominator;
}

void require_positive(std::int64_t value, std::string_view family, std::string_view field) {
  if (value <= 0) fail_input("layout: {} needs {} > 0, got {}", family, field, value);
}

StateShape conv_shape(std::string name, std::int64_t dim, std::int64_t state_len,
                      ConvLayout layout) {
  if (state_len <= 0) fail_input("layout: conv state '{}' has state_len {} <= 0", name, state_len);
  StateShape shape{.name = std::move(name), .kind = StateKind::conv};
  shape.conv_dim = dim;
  shape.conv_state_len = state_len;
  shape.dims = layout == ConvLayout::SD ? std::vector<std::int64_t>{state_len, dim}
                                        : std::vector<std::int64_t>{dim, state_len};
  return shape;
}

StateShape temporal_shape(std::string name, std::vector<std::int64_t> dims) {
  return StateShape{.name = std::move(name), .kind = StateKind::temporal, .dims = std::move(dims)};
}

std::vector<StateShape> mamba1(const FamilyParams& p, std::int64_t tp, ConvLayout layout) {
  require_positive(p.intermediate_size, "mamba1", "intermediate_size");
  require_positive(p.state_size, "mamba1", "state_size");
  require_positive(p.conv_kernel, "mamba1", "conv_kernel");
  const std::int64_t conv_dim = divide(p.intermediate_size, tp, "intermediate_size");
  return {conv_shape("conv", conv_dim, p.conv_kernel - 1, layout),
          temporal_shape("temporal", {conv_dim, p.state_size})};
}

std::vector<StateShape> mamba2(const FamilyParams& p, std::int64_t tp, std::int64_t num_spec,
                               ConvLayout layout) {
  require_positive(p.intermediate_size, "mamba2", "intermediate_size");
  require_positive(p.n_groups, "mamba2", "n_groups");
  require_positive(p.num_heads, "mamba2", "num_heads");
  require_positive(p.head_dim, "mamba2", "head_dim");
  require_positive(p.state_size, "mamba2", "state_size");
  require_positive(p.conv_kernel, "mamba2", "conv_kernel");
  const std::int64_t n_groups = p.n_groups + extra_groups_for_head_shards(p.n_groups, tp);
  const std::int64_t conv_dim = p.intermediate_size + 2 * n_groups * p.state_size;
  return {conv_shape("conv", divide(conv_dim, tp, "conv_dim"), p.conv_kernel - 1 + num_spec,
                     layout),
          temporal_shape("temporal",
                         {divide(p.num_heads, tp, "num_heads"), p.head_dim, p.state_size})};
}

std::vector<StateShape> short_conv(const FamilyParams& p, std::int64_t tp, ConvLayout layout) {
  require_positive(p.intermediate_size, "short_conv", "intermediate_size");
  require_positive(p.conv_kernel, "short_conv", "conv_kernel");
  return {conv_shape("conv", divide(p.intermediate_size, tp, "intermediate_size"),
                     p.conv_kernel - 1, layout)};
}

std::vector<StateShape> gated_delta_net(const FamilyParams& p, std::int64_t tp,
                                        std::int64_t num_spec, ConvLayout layout) {
  require_positive(p.num_k_heads, "gated_delta_net", "num_k_heads");
  require_positive(p.num_v_heads, "gated_delta_net", "num_v_heads");
  require_positive(p.head_k_dim, "gated_delta_net", "head_k_dim");
  require_positive(p.head_v_dim, "gated_delta_net", "head_v_dim");
  require_positive(p.conv_kernel, "gated_delta_net", "conv_kernel");
  const std::int64_t conv_dim = p.head_k_dim * p.num_k_heads * 2 + p.head_v_dim * p.num_v_heads;
  return {conv_shape("conv", divide(conv_dim, tp, "conv_dim"), p.conv_kernel - 1 + num_spec,
                     layout),
          temporal_shape("temporal", {divide(p.num_v_heads, tp, "num_v_heads"), p.head_v_dim,
                                      p.head_k_dim})};
}

std::vector<StateShape> kda(const FamilyParams& p, std::int64_t tp, ConvLayout layout) {
  require_positive(p.num_heads, "kda", "num_heads");
  require_positive(p.head_dim, "kda", "head_dim");
  require_positive(p.conv_kernel, "kda", "conv_kernel");
  const std::int64_t num_k_heads = p.num_k_heads > 0 ? p.num_k_heads : p.num_heads;
  const std::int64_t head_k_dim = p.head_k_dim > 0 ? p.head_k_dim : p.head_dim;
  const std::int64_t proj = divide(p.num_heads * p.head_dim, tp, "num_heads * head_dim");
  const std::int64_t proj_k = divide(num_k_heads * head_k_dim, tp, "num_k_heads * head_k_dim");
  return {conv_shape("conv", proj, p.conv_kernel - 1, layout),
          conv_shape("conv_k", proj_k, p.conv_kernel - 1, layout),
          conv_shape("conv_v", proj_k, p.conv_kernel - 1, layout),
          temporal_shape("recurrent",
                         {divide(p.num_heads, tp, "num_heads"), p.head_dim, p.head_dim})};
}

std::vector<StateShape> linear_attention(const FamilyParams& p, std::int64_t tp) {
  require_positive(p.num_heads, "linear_attention", "num_heads");
  require_positive(p.head_dim, "linear_attention", "head_dim");
  // Seed 001 uses floor division here (num_heads // tp_size), not divide().
  const std::int64_t heads = p.num_heads / tp;
  if (heads <= 0) fail_input("layout: linear_attention has {} heads for tp {}", p.num_heads, tp);
  return {temporal_shape("temporal", {heads, p.head_dim, p.head_dim})};
}

} // namespace

std::int64_t StateShape::num_elements() const {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

std::string_view to_string(Family family) {
  switch (family) {
  case Family::mamba1: return "mamba1";
  case Family::mamba2: return "mamba2";
  case Family::short_conv: return "short_conv";
  case Family::gated_delta_net: return "gated_delta_net";
  case Family::kda: return "kda";
  case Family::linear_attention: return "linear_attention";
  }
  return "?";
}

Family parse_family(std::string_view text) {
  for (const Family f : kAllFamilies)
    if (to_string(f) == text) return f;
  fail_input("family: expected one of mamba1, mamba2, short_conv, gated_delta_net, kda, "
             "linear_attention, got '{}'",
             text);
}

std::int64_t extra_groups_for_head_shards(std::int64_t n_groups, std::int64_t tp_size) {
  if (n_groups % tp_size == 0) return 0;
  return tp_size - n_groups; // for n_groups == 1 this is exactly tp_size - 1 (seed 001)
}

std::vector<StateShape> state_shapes(Family family, const FamilyParams& params,
                                     std::int32_t tp_size, std::int32_t num_spec,
                                     ConvLayout conv_layout) {
  if (tp_size <= 0) fail_input("layout: tp size must be positive, got {}", tp_size);
  if (num_spec < 0) fail_input("layout: num_spec must be >= 0, got {}", num_spec);
  switch (family) {
  case Family::mamba1: return mamba1(params, tp_size, conv_layout);
  case Family::mamba2: return mamba2(params, tp_size, num_spec, conv_layout);
  case Family::short_conv: return short_conv(params, tp_size, conv_layout);
  case Family::gated_delta_net: return gated_delta_net(params, tp_size, num_spec, conv_layout);
  case Family::kda: return kda(params, tp_size, conv_layout);
  case Family::linear_attention: return linear_attention(params, tp_size);
  }
  MC_ASSERT(false);
  return {};
}

} // namespace mc::model
