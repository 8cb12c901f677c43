/* The kernels' mutation points, each as model/LAUNCH_KINDS.md specifies it.
 *
 * Every kernel body takes a policy type and asks it at the few places where a mutant differs
 * from the specification: a formula of a decision, which block or offset a copy reads, how
 * its bytes move. `Clean` is the implementation under test; each kernel mutant derives from
 * it and redefines one point (gpu/kernels/mutant_policies.cuh). The points are static and
 * inline, so the clean kernels are their own instantiation and compile to the same code as
 * they would with the formulas written in place.
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/byte_copy.cuh"
#include "gpu/kernels/ds_copy.cuh"
#include "gpu/kernels/memory_ops.cuh"

#include <cstdint>

namespace mc::gpu {

// Where a conv state's copy reads: a block, and the byte offset of its first kept token in it.
struct ConvSource {
  std::int32_t block_id = 0;
  std::int64_t byte_offset = 0;
};

struct Clean {
  // --- Decisions (gpu/kernels/decide.cuh)

  // A save copies unless its source and destination are the same column with bias 0.
  static MC_HD_INLINE bool save_copies(bool same_col, std::int32_t bias) {
    return !(same_col && bias == 0);
  }
  // A save resets a to 1 exactly when its source and destination are the same column.
  static MC_HD_INLINE bool save_resets(bool same_col, bool /*copies*/) { return same_col; }
  // postprocess_align decides with the a the launch began with (the snapshot): `decide(a)`.
  template <class Decide>
  static MC_HD_INLINE RowDecision save_with_launch_accepted(std::int64_t a, Decide decide) {
    return decide(a);
  }
  // postprocess_align: the row's decider writes its reset of a, copying or not, before it
  // publishes the row's plan; no other program reads a in this launch, so no decision can
  // race with the reset.
  static MC_HD_INLINE bool decider_writes_reset(bool /*copies*/) { return true; }
  // A copy program copies its units of a row as the decider planned them, deciding nothing
  // again (kind K; `owns_first_unit`: its share holds the row's unit 0, the first
  // (group, layer, state) tensor; `team` the program's threads).
  template <KernelKind K, class Team>
  static MC_HD_INLINE bool program_copies_row(const FusedParams& /*p*/, std::int32_t /*b*/,
                                              bool /*owns_first_unit*/, Team /*team*/) {
    return true;
  }
  // A precopy row copies when it has a source column and it is not its destination (columns
  // compared, never physical blocks). A row that copies nothing may carry src_col -1 (the V1
  // runner marks every such row so).
  static MC_HD_INLINE bool precopy_copies(const FusedParams& /*p*/, std::int32_t /*b*/,
                                          std::int32_t src_col, std::int32_t dst_col) {
    return src_col >= 0 && src_col != dst_col;
  }
  // precopy copies with the row's token_bias.
  static MC_HD_INLINE std::int32_t precopy_bias(std::int32_t token_bias) { return token_bias; }
  // preprocess_align's new column: cdiv(c + q, B) - 1 (c + q >= 0).
  static MC_HD_INLINE std::int64_t preprocess_column(std::int64_t tokens_after,
                                                     std::int32_t block_size) {
    return (tokens_after + block_size - 1) / block_size - 1;
  }
  // preprocess_align's source column: the old one, read before the new one is written.
  static MC_HD_INLINE std::int32_t preprocess_source_column(std::int32_t old_col,
                                                            std::int32_t /*new_col*/) {
    return old_col;
  }
  // preprocess_align's token bias: max(a - 1, 0).
  static MC_HD_INLINE std::int32_t preprocess_token_bias(std::int32_t a) {
    return a - 1 > 0 ? a - 1 : 0;
  }
  // preprocess_align resets a to 1 when the request had a column and it changed.
  static MC_HD_INLINE bool preprocess_resets_accepted(std::int32_t old_col, std::int64_t new_col) {
    return old_col >= 0 && old_col != new_col;
  }

  // --- Block tables (gpu/kernels/fused_launch.cuh)

  // A request's block-table row: its slot where the launch hands the kernels per-slot tables
  // (#55506), else its batch row b, in V2 kinds too, whose per-request arrays are indexed by
  // the slot instead (model/LAUNCH_KINDS.md, "Indexing").
  static MC_HD_INLINE std::int32_t table_row(const FusedParams& p, std::int32_t b,
                                             std::int32_t slot) {
    return p.tables_by_slot ? slot : b;
  }
  // The block table a group's blocks are read from: the group's own (in vLLM a hybrid model's
  // groups take their blocks from one pool, so their tables hold different ids).
  static MC_HD_INLINE std::int32_t table_group(std::int32_t group) { return group; }

  // --- Copy geometry (gpu/kernels/state_copy.cuh)

  // Block `block_id` of a state: id x stride in 64 bits (class B).
  static MC_HD_INLINE std::uint64_t block_address(std::uint64_t base, std::int32_t block_id,
                                                  std::int64_t stride_bytes) {
    return block_addr(base, block_id, stride_bytes);
  }
  // Token rows a conv copy keeps: max(w - bias, 0).
  static MC_HD_INLINE std::int64_t conv_kept_tokens(std::int32_t conv_width, std::int32_t bias) {
    return max64(static_cast<std::int64_t>(conv_width) - bias, 0);
  }
  // The temporal source is the block at column src + bias.
  static MC_HD_INLINE std::int32_t temporal_source_block(const GroupBlocks& blocks) {
    return blocks.temporal_src;
  }
  // The conv source is the block at column src, read from `byte_offset` (the bias's tokens).
  static MC_HD_INLINE ConvSource conv_source(const GroupBlocks& blocks, std::int64_t byte_offset) {
    return ConvSource{.block_id = blocks.conv_src, .byte_offset = byte_offset};
  }
  // SD: the bias skips whole token rows.
  static MC_HD_INLINE std::int64_t sd_source_offset(const TensorDesc& t, std::int32_t bias) {
    return static_cast<std::int64_t>(bias) * t.token_row_bytes;
  }
  // DS: each dim row's copy starts `bias` elements in.
  static MC_HD_INLINE std::int64_t ds_source_offset(const TensorDesc& t, std::int32_t bias) {
    return static_cast<std::int64_t>(bias) * t.elem_size;
  }

  // --- Moving the bytes (state_copy.cuh, batch_copy.cuh)

  // Every recorded copy moves its bytes.
  static MC_HD_INLINE bool copy_moves_bytes(const TensorDesc& /*t*/, std::int32_t /*tensor*/,
                                            std::int32_t /*src_block_id*/,
                                            std::int32_t /*dst_block_id*/) {
    return true;
  }
  // Unit `chunk` of a flat copy, memmove-exact (byte_copy.cuh).
  template <class Team>
  static MC_HD_INLINE void move_flat(Team team, std::uint64_t dst, std::uint64_t src,
                                     std::int64_t bytes, std::int32_t chunk) {
    copy_flat_chunk(team, dst, src, bytes, chunk, kUnitBytes);
  }
  // DS rows of one unit, memmove-exact for a same-block shift (ds_copy.cuh).
  template <class Team> static MC_HD_INLINE void move_ds_rows(Team team, const DsRows& rows) {
    copy_ds_rows(team, rows);
  }
  // The batched flat copy applies every triple of its plan.
  static MC_HD_INLINE bool copies_triple(std::int64_t /*i*/, std::int64_t /*num_triples*/) {
    return true;
  }
};

} // namespace mc::gpu
