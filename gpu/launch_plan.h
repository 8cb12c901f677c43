// Host-side preparation shared by the host and cuda backends: a LaunchCase turned into the
// PODs the kernels read (tensor descriptors from the flattened metadata, work units, group
// masks), checks of the input the kernels assume valid, V1's flat copy plan for batch_copy,
// and the compaction of recorded decisions. Written from model/LAUNCH_KINDS.md alone; it
// shares no code with oracle/ (DESIGN.md, the two walls).
#pragma once

#include "gpu/device_types.h"
#include "model/launch.h"
#include "model/request_arrays.h"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mc::gpu {

KernelKind to_kernel_kind(model::LaunchKind kind); // not for a copy plan

// Whether the kind's copies are a flat list planned on the host (model::LaunchWork::copy_plan,
// V1's batch_copy) rather than decided by the fused kernels.
bool runs_copy_plan(model::LaunchKind kind);

// Descriptors of every state tensor, with `arena_base_addrs[i]` the address of arena i.
std::vector<TensorDesc> make_tensor_descs(const model::Layout& layout,
                                          std::span<const std::uint64_t> arena_base_addrs);
// Work units of one copying request: every chunk of every tensor, in tensor order.
std::vector<UnitRef> make_units(std::span<const TensorDesc> tensors);

// The layout-level fields of FusedParams (everything but addresses of arrays and scratch).
FusedParams make_fused_params(const model::LaunchCase& launch, std::span<const TensorDesc> tensors,
                              std::span<const UnitRef> units);

// Throws model::InputError when the case is malformed: arena sizes, block-table shapes,
// array lengths of the kind, slots out of range or shared by two rows.
void validate_case(const model::LaunchCase& launch);
// The same checks but the arenas': for a caller whose arenas live elsewhere (the cuda engine
// executor's device arenas, made from the layout).
void validate_case_arrays(const model::LaunchCase& launch);

// Throws model::InputError naming request, tensor and index when a copy the fused kinds
// would make reads a column outside the row or a block outside the arena (LAUNCH_KINDS.md,
// "Validity"); run before any kernel so a bad case never becomes a wild access.
void validate_fused_copies(const model::LaunchCase& launch);

// The per-request arrays as the launch starts: inputs, plus the outputs the launcher
// prepares (postprocess: num_accepted_out = num_accepted; preprocess_align: src_col and
// token_bias sized to num_slots when the case left them empty, zero-filled).
model::RequestArrays prepare_request_arrays(const model::LaunchCase& launch);

// The RequestPointers field of each array of model::kRequestArrays, in its order.
inline constexpr std::array<std::int32_t * RequestPointers::*, model::kRequestArrays.size()>
    kRequestPointerFields{&RequestPointers::idx_mapping,      &RequestPointers::num_accepted,
                          &RequestPointers::state_idx,        &RequestPointers::num_scheduled,
                          &RequestPointers::num_computed,     &RequestPointers::num_draft,
                          &RequestPointers::new_num_computed, &RequestPointers::query_start_loc,
                          &RequestPointers::src_col,          &RequestPointers::token_bias,
                          &RequestPointers::num_accepted_out};

// Points `requests` at the int32 arrays of `arrays` (host memory; null where one is empty).
RequestPointers host_request_pointers(model::RequestArrays& arrays);

// V1's flat copy plan (batch_copy), addresses from `arena_base_addrs`.
struct BatchPlan {
  bool unsupported = false;
  std::string unsupported_reason;
  std::vector<CopyTriple> triples; // non-empty copies only, first_unit filled
  std::int64_t num_units = 0;
  std::vector<model::CopyDecision> decisions; // sorted (batch_row, tensor)
};
BatchPlan plan_batch_copy(const model::LaunchCase& launch,
                          std::span<const std::uint64_t> arena_base_addrs);

// Recorded slots (batch_row * num_tensors + tensor) to decisions sorted (batch_row, tensor).
std::vector<model::CopyDecision> compact_decisions(std::span<const DecisionRecord> records,
                                                   const model::Layout& layout);

// Programs a launch of the fused kind runs with `programs_max` copy programs at most.
int fused_program_count(const FusedParams& params, std::int64_t programs_max);

} // namespace mc::gpu
