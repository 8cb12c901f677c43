// Plain structs shared by the kernels, the host backend and the cuda backend.
//
// They hold addresses as unsigned 64-bit integers (a device address can be >= 2^63 when
// seen as signed, class B) and raw pointers to int32 per-request arrays. No model/ header
// is included here: device code sees only these PODs, built on the host from model/
// metadata (gpu/launch_plan.h).
#pragma once

#include <cstdint>

namespace mc::gpu {

// The launch kinds with a kernel of their own; batch_copy is a host plan plus
// the batched-copy kernel (gpu/kernels/batch_copy.cuh).
enum class KernelKind : std::uint8_t { postprocess, postprocess_align, precopy, preprocess_align };

enum class TensorKind : std::uint8_t { conv_sd, conv_ds, temporal };

inline constexpr int kThreadsPerCta = 256;
inline constexpr int kSegmentRows = kThreadsPerCta;   // rows decided by one CTA
inline constexpr int kSegmentsMax = 64;               // so num_reqs <= 16384
inline constexpr int kGroupsMaxDevice = 16;           // model::kGroupsMax
inline constexpr std::int64_t kUnitBytes = 32 * 1024; // copy bytes per work unit
inline constexpr std::int32_t kRowsMax = kSegmentRows * kSegmentsMax;

// One state tensor, flattened from model::StateMeta (REFERENCE.md 1).
struct TensorDesc {
  std::uint64_t base_addr = 0;          // block 0 of this state
  std::int64_t block_stride_bytes = 0;  // page stride, never a copy size
  std::int64_t natural_bytes = 0;       // bytes of one block's state
  std::int64_t token_row_bytes = 0;     // SD: inner * elem (one token row); else 0
  std::int64_t ds_row_stride_bytes = 0; // DS: bytes between dim rows; else 0
  std::int32_t conv_width = 0;          // state_len for conv, 0 for temporal
  std::int32_t ds_row_count = 0;        // DS: dim rows; else 0
  std::int32_t elem_size = 0;
  std::int32_t group = 0;
  std::int32_t num_units = 0; // work units of kUnitBytes covering natural_bytes (>= 1)
  TensorKind kind = TensorKind::temporal;
};

// Work unit j of a copying request: chunk `chunk` of tensor `tensor`.
struct UnitRef {
  std::int32_t tensor = 0;
  std::int32_t chunk = 0;
};

// The decision for one batch row, made once (gpu/kernels/decide.cuh).
struct RowDecision {
  std::int32_t slot = -1; // -1: the row is skipped (idx_mapping)
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  std::int32_t bias = 0;
  bool copy = false;  // copy every tensor from src_col to dst_col with bias
  bool reset = false; // num_accepted (V2) or num_accepted_out (V1) becomes 1
};

// Block ids of one copying row for one group, resolved by the decider.
struct GroupBlocks {
  std::int32_t conv_src = 0;     // bt(row, src_col)
  std::int32_t temporal_src = 0; // bt(row, src_col + bias)
  std::int32_t dst = 0;          // bt(row, dst_col)
};

// One recorded (request, tensor) copy, at slot batch_row * num_tensors + tensor.
struct DecisionRecord {
  std::int32_t valid = 0;
  std::int32_t batch_row = 0;
  std::int32_t slot = 0;
  std::int32_t tensor = 0;
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  std::int32_t token_bias = 0;
  std::int32_t src_block_id = 0;
  std::int32_t dst_block_id = 0;
  std::int32_t pad = 0;
  std::int64_t src_byte_offset = 0;
  std::int64_t bytes = 0;
};

// Per-slot arrays (int32, host or device memory); null where the kind does not use one.
struct RequestPointers {
  std::int32_t* idx_mapping = nullptr;
  std::int32_t* num_accepted = nullptr;
  std::int32_t* state_idx = nullptr;
  std::int32_t* num_scheduled = nullptr;
  std::int32_t* num_computed = nullptr;
  std::int32_t* num_draft = nullptr;
  std::int32_t* new_num_computed = nullptr;
  std::int32_t* query_start_loc = nullptr;
  std::int32_t* src_col = nullptr;
  std::int32_t* token_bias = nullptr;
  std::int32_t* num_accepted_out = nullptr;
};

// Scratch the fused kernel keeps between its decision and copy phases.
struct FusedScratch {
  std::int32_t* row_decisions = nullptr;  // [num_reqs * 4]: slot, src_col, dst_col, bias
  GroupBlocks* row_blocks = nullptr;      // [num_reqs * num_groups]
  std::int32_t* active_rows = nullptr;    // [num_segments * kSegmentRows]
  std::uint64_t* segment_flags = nullptr; // [kSegmentsMax]: epoch << 32 | active rows, once
                                          // the segment is published
  std::uint32_t* ticket = nullptr;        // CTA start order; reset by the last CTA
  DecisionRecord* records = nullptr;      // [num_reqs * num_tensors] when recording
};

// How the CTAs of a fused launch learn their program index. `cooperative` (the default where
// the device supports it): a cooperative launch, every CTA resident at once (the runtime
// guarantees it), so the program is blockIdx.x. `ticket`: an atomic ticket in start order,
// valid for any grid and any co-residency, at the price of one contended atomic per CTA
// (on an H100 the decision-only launch took 7.3 us back to back with tickets, 3.8 us
// cooperative).
enum class FusedStart : std::uint8_t { ticket, cooperative };

// Everything one launch of the fused kernel reads (passed by value).
struct FusedParams {
  std::int32_t num_reqs = 0;
  std::int32_t num_slots = 0;
  // Row b's slot is idx_mapping[b] (-1: skipped), else b itself (V1 kinds: vLLM launches them
  // with idx_mapping None, HAS_IDX_MAPPING False).
  bool slot_from_idx_mapping = false;
  // Row b's block-table row is its slot (per-request-slot tables, #55506), else b.
  bool tables_by_slot = false;
  std::int32_t block_size = 1; // mamba block size B
  std::int32_t num_groups = 0;
  std::int32_t num_tensors = 0;
  std::int32_t num_units = 0; // work units per copying request
  std::int32_t num_segments = 0;
  std::uint32_t epoch = 1;
  FusedStart start = FusedStart::cooperative;
  std::uint32_t groups_with_conv = 0;      // bit g: group g has a conv state
  std::uint32_t groups_with_temporal = 0;  // bit g: group g has a temporal state
  std::int64_t block_table_row_stride = 0; // elements, shared by all groups
  std::uint64_t block_tables[kGroupsMaxDevice] = {};
  const TensorDesc* tensors = nullptr;
  const UnitRef* units = nullptr;
  RequestPointers requests;
  FusedScratch scratch;
};

// One flat copy of the V1 plan: `bytes` from `src_addr` to `dst_addr`, memmove semantics.
struct CopyTriple {
  std::uint64_t src_addr = 0;
  std::uint64_t dst_addr = 0;
  std::int64_t bytes = 0;
  std::int64_t first_unit = 0; // prefix of unit counts over the triples before this one
};

struct BatchCopyParams {
  const CopyTriple* triples = nullptr;
  std::int64_t num_triples = 0;
  std::int64_t num_units = 0; // total work units
};

} // namespace mc::gpu
