// State families and the per-block state shapes of each (seed 001, MambaStateShapeCalculator).
//
// Every family yields a tuple of states per layer; a state is either a conv window
// (slides along state_len) or a temporal/recurrent state (copied whole). Conv
// shapes are oriented by the layout: SD = (state_len, dim), DS = (dim, state_len).
// num_spec widens the conv window (K-1+num_spec) for mamba2 and gated_delta_net only;
// mamba1, short_conv and kda keep K-1 (as seed 001 computes them).
#pragma once

#include "model/config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

enum class Family : std::uint8_t {
  mamba1,
  mamba2,
  short_conv,
  gated_delta_net,
  kda,
  linear_attention
};
inline constexpr Family kAllFamilies[] = {Family::mamba1,          Family::mamba2,
                                          Family::short_conv,      Family::gated_delta_net,
                                          Family::kda,             Family::linear_attention};

enum class StateKind : std::uint8_t { conv, temporal };

// The model hyper-parameters a family reads; unused fields are ignored.
struct FamilyParams {
  std::int64_t intermediate_size = 0; // mamba1, mamba2, short_conv
  std::int64_t n_groups = 0;          // mamba2
  std::int64_t num_heads = 0;         // mamba2, kda, linear_attention
  std::int64_t head_dim = 0;          // mamba2, kda, linear_attention
  std::int64_t state_size = 0;        // mamba1, mamba2 (d_state)
  std::int64_t conv_kernel = 0;       // K for every family with a conv state
  std::int64_t num_k_heads = 0;       // gated_delta_net, kda (0: = num_heads)
  std::int64_t num_v_heads = 0;       // gated_delta_net
  std::int64_t head_k_dim = 0;        // gated_delta_net, kda (0: = head_dim)
  std::int64_t head_v_dim = 0;        // gated_delta_net
};

// The FamilyParams fields by name, in the order files write them.
struct FamilyParamField {
  std::string_view name;
  std::int64_t FamilyParams::*member;
};
inline constexpr FamilyParamField kFamilyParamFields[] = {
    {"intermediate_size", &FamilyParams::intermediate_size},
    {"n_groups", &FamilyParams::n_groups},
    {"num_heads", &FamilyParams::num_heads},
    {"head_dim", &FamilyParams::head_dim},
    {"state_size", &FamilyParams::state_size},
    {"conv_kernel", &FamilyParams::conv_kernel},
    {"num_k_heads", &FamilyParams::num_k_heads},
    {"num_v_heads", &FamilyParams::num_v_heads},
    {"head_k_dim", &FamilyParams::head_k_dim},
    {"head_v_dim", &FamilyParams::head_v_dim},
};

// The shape of one state within one block (the leading num_blocks axis excluded).
struct StateShape {
  std::string name;                // "conv", "temporal", "conv_k", "recurrent", ...
  StateKind kind = StateKind::conv;
  std::vector<std::int64_t> dims;  // oriented per block, row-major
  std::int64_t conv_dim = 0;       // conv only: channels after the TP split
  std::int64_t conv_state_len = 0; // conv only: window length in tokens

  std::int64_t num_elements() const;
};

std::string_view to_string(Family family);
Family parse_family(std::string_view text); // throws InputError

// Mamba2 replicates groups so that every head shard has its groups (seed 001).
std::int64_t extra_groups_for_head_shards(std::int64_t n_groups, std::int64_t tp_size);

// The state tuple of one layer of `family`. Throws InputError when tp does not
// divide a sharded dimension or a parameter the family needs is not positive.
std::vector<StateShape> state_shapes(Family family, const FamilyParams& params,
                                     std::int32_t tp_size, std::int32_t num_spec,
                                     ConvLayout conv_layout);

} // namespace mc::model
