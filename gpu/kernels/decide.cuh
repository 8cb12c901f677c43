/* Per-row decisions of every launch kind (model/LAUNCH_KINDS.md; REFERENCE.md 2).
 *
 * One call per batch row b, made once per launch by one thread (never once per state):
 * - postprocess (V1), slot b: running = computed + scheduled - draft, new = running + a - 1;
 *   postprocess_align (V2), slot idx_mapping[b]: new = new_num_computed, running = new - a + 1.
 *   aligned = floor(new / B) * B; when aligned >= running: bias = aligned - running,
 *   dst = aligned / B - 1, src = state_idx; src == dst (columns, not addresses) resets a to 1
 *   (V1: num_accepted_out, V2: num_accepted in place) and, with bias == 0, copies nothing.
 * - precopy (V2: slot idx_mapping[b]; V1's fused launch precopy_v1: slot b, no idx_mapping):
 *   copy state_idx's predecessor src_col -> state_idx with token_bias unless src_col < 0 or
 *   src_col == state_idx.
 * - preprocess_align (V2 bookkeeping): src_col = old state_idx, token_bias = max(a - 1, 0),
 *   state_idx = cdiv(num_computed + qlen, B) - 1, a = 1 when old >= 0 and it changed.
 * Which slot a row has and where its table row is (b, or the slot with per-slot tables) are
 * the launch's (FusedParams), not the kernel kind's: one kernel serves each table convention.
 * read_row only reads and decide_row only computes, so the decision uses every value as it was
 * when the launch began (the snapshot the contract requires: the seed re-reads a in every
 * (request, state) program while program 0 resets it); write_row_outputs then writes this
 * row's outputs.
 * Two rows never share a slot (invalid input), so no other thread reads what it writes.
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/clean_policy.cuh"
#include "gpu/kernels/memory_ops.cuh"

#include <cstdint>

namespace mc::gpu {

// The slot whose arrays row b reads and writes. Only a launch given an idx_mapping reads it:
// the V1 kinds have none (a null pointer).
MC_HD_INLINE std::int32_t row_slot(const FusedParams& p, std::int32_t b) {
  return p.slot_from_idx_mapping ? p.requests.idx_mapping[b] : b;
}

// The post-step save of a row with `running` and `new_computed` tokens (REFERENCE.md 2).
template <class Policy>
MC_HD_INLINE RowDecision decide_save(std::int32_t slot, std::int64_t running,
                                     std::int64_t new_computed, std::int32_t state_idx,
                                     std::int32_t block_size) {
  RowDecision d;
  d.slot = slot;
  const std::int64_t aligned = floor_div64(new_computed, block_size) * block_size;
  if (aligned < running) return d;
  d.bias = static_cast<std::int32_t>(aligned - running);
  d.dst_col = static_cast<std::int32_t>(aligned / block_size - 1);
  d.src_col = state_idx;
  const bool same_col = d.src_col == d.dst_col;
  d.copy = Policy::save_copies(same_col, d.bias);
  d.reset = Policy::save_resets(same_col, d.copy);
  return d;
}

// The launch-time values a row's decision reads, loaded apart from deciding so that a CTA can
// issue the loads before it knows it decides (gpu/kernels/fused_launch.cuh).
struct RowInputs {
  std::int32_t slot = -1;
  std::int32_t v[5] = {}; // per kind, in the order read_row loads them
};

template <KernelKind K> MC_HD_INLINE RowInputs read_row(const FusedParams& p, std::int32_t b) {
  const RequestPointers& r = p.requests;
  RowInputs in;
  in.slot = row_slot(p, b);
  if (in.slot < 0) return in;
  const std::int32_t s = in.slot;
  if constexpr (K == KernelKind::postprocess) {
    in.v[0] = r.num_accepted[s];
    in.v[1] = r.num_computed[s];
    in.v[2] = r.num_scheduled[s];
    in.v[3] = r.num_draft[s];
    in.v[4] = r.state_idx[s];
  } else if constexpr (K == KernelKind::postprocess_align) {
    in.v[0] = r.num_accepted[s];
    in.v[1] = r.new_num_computed[s];
    in.v[2] = r.state_idx[s];
  } else if constexpr (K == KernelKind::precopy) {
    in.v[0] = r.src_col[s];
    in.v[1] = r.state_idx[s];
    in.v[2] = r.token_bias[s];
  }
  return in;
}

template <KernelKind K, class Policy>
MC_HD_INLINE RowDecision decide_row(const FusedParams& p, std::int32_t b, const RowInputs& in) {
  const std::int32_t slot = in.slot;
  RowDecision none;
  if (slot < 0) return none;
  none.slot = slot;
  if constexpr (K == KernelKind::postprocess) {
    const std::int64_t a = in.v[0];
    const std::int64_t running = static_cast<std::int64_t>(in.v[1]) + in.v[2] - in.v[3];
    return decide_save<Policy>(slot, running, running + a - 1, in.v[4], p.block_size);
  } else if constexpr (K == KernelKind::postprocess_align) {
    const std::int64_t new_computed = in.v[1];
    const std::int32_t state_idx = in.v[2];
    return Policy::save_with_launch_accepted(in.v[0], [&](std::int64_t a) {
      return decide_save<Policy>(slot, new_computed - a + 1, new_computed, state_idx, p.block_size);
    });
  } else if constexpr (K == KernelKind::precopy) {
    RowDecision d = none;
    d.src_col = in.v[0];
    d.dst_col = in.v[1];
    d.bias = Policy::precopy_bias(in.v[2]);
    d.copy = Policy::precopy_copies(p, b, d.src_col, d.dst_col);
    return d;
  } else {
    (void)b;
    return none; // preprocess_align copies nothing
  }
}

// The decision of row b from its launch-time values, read now.
template <KernelKind K, class Policy>
MC_HD_INLINE RowDecision decide_row(const FusedParams& p, std::int32_t b) {
  return decide_row<K, Policy>(p, b, read_row<K>(p, b));
}

// V2 bookkeeping for one row (preprocess_align); reads before it writes.
template <class Policy>
MC_HD_INLINE void preprocess_align_row(const FusedParams& p, std::int32_t b, std::int32_t slot) {
  const RequestPointers& r = p.requests;
  const std::int32_t old_idx = r.state_idx[slot];
  const std::int32_t a = r.num_accepted[slot];
  const std::int64_t qlen =
      static_cast<std::int64_t>(r.query_start_loc[b + 1]) - r.query_start_loc[b];
  const std::int64_t new_idx = Policy::preprocess_column(r.num_computed[slot] + qlen, p.block_size);
  r.src_col[slot] = Policy::preprocess_source_column(old_idx, static_cast<std::int32_t>(new_idx));
  r.token_bias[slot] = Policy::preprocess_token_bias(a);
  r.state_idx[slot] = static_cast<std::int32_t>(new_idx);
  if (Policy::preprocess_resets_accepted(old_idx, new_idx)) r.num_accepted[slot] = 1;
}

// The outputs of row b, written after its decision was made.
template <KernelKind K, class Policy>
MC_HD_INLINE void write_row_outputs(const FusedParams& p, std::int32_t b, const RowDecision& d) {
  if (d.slot < 0) return;
  if constexpr (K == KernelKind::postprocess) {
    if (d.reset) p.requests.num_accepted_out[d.slot] = 1;
  } else if constexpr (K == KernelKind::postprocess_align) {
    if (d.reset && Policy::decider_writes_reset(d.copy)) p.requests.num_accepted[d.slot] = 1;
  } else if constexpr (K == KernelKind::preprocess_align) {
    preprocess_align_row<Policy>(p, b, d.slot);
  }
}

} // namespace mc::gpu
