/* The kernel mutants as policies: each derives from Clean (gpu/kernels/clean_policy.cuh) and
 * redefines the one mutation point it breaks, as its line of MC_KERNEL_MUTANTS (gpu/mutant.h)
 * describes. A policy is named like its mutant, so the map from the runtime Mutant to the
 * policy type (KernelPolicy, visit_kernel_policy) is generated from that list and a mutant
 * without a policy does not compile.
 *
 * Every mutant of MC_KERNEL_MUTANTS_IN_BOUNDS keeps its accesses inside the arenas and block
 * tables of a valid case (a wrong byte, never a wild address); those of
 * MC_KERNEL_MUTANTS_OUT_OF_BOUNDS (at the end) do not, on purpose.
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/byte_copy.cuh"
#include "gpu/kernels/clean_policy.cuh"
#include "gpu/kernels/decide.cuh"
#include "gpu/kernels/ds_copy.cuh"
#include "gpu/kernels/memory_ops.cuh"
#include "gpu/mutant.h"

#include <cstdint>

namespace mc::gpu::mutants {

// --- Decisions

struct precopy_guard_by_address : Clean {
  static MC_HD_INLINE bool precopy_copies(const FusedParams& p, std::int32_t b,
                                          std::int32_t src_col, std::int32_t dst_col) {
    if (!Clean::precopy_copies(p, b, src_col, dst_col)) return false;
    // The physical blocks of group 0 compared instead of the columns.
    const auto* table =
        reinterpret_cast<const std::int32_t*>(static_cast<std::uintptr_t>(p.block_tables[0]));
    const std::int64_t row = static_cast<std::int64_t>(Clean::table_row(p, b, row_slot(p, b))) *
                             p.block_table_row_stride;
    return table[row + src_col] != table[row + dst_col];
  }
};

struct decide_reads_reset_accepted : Clean {
  // As if a were re-read after program 0 reset it: a row that resets decides with a = 1.
  template <class Decide>
  static MC_HD_INLINE RowDecision save_with_launch_accepted(std::int64_t a, Decide decide) {
    const RowDecision d = decide(a);
    if (!d.reset) return d;
    RowDecision late = decide(1);
    late.reset = true;
    return late;
  }
};

// The seed's race, in the fused kernel: a copying row's reset is not the decider's but the
// program's that copies the row's first tensor, written as soon as that program has decided;
// every program deciding the row again reads a live, with no snapshot. A program whose share
// starts inside the row and that reads after the write decides with a = 1 (no copy: the
// same-column shift is lost for its tensors). On cuda that needs the owner to get there
// first, which depends on how the CTAs are scheduled; the host runs the owner, the lowest
// program of the row, first, so a row over two programs fails there every time.
struct reset_races_other_programs : Clean {
  static MC_HD_INLINE bool decider_writes_reset(bool copies) { return !copies; }

  template <KernelKind K, class Team>
  static MC_HD_INLINE bool program_copies_row(const FusedParams& p, std::int32_t b,
                                              bool owns_first_unit, Team team) {
    if constexpr (K != KernelKind::postprocess_align) {
      return true;
    } else {
      RowInputs in = read_row<K>(p, b);
      in.v[0] = load_published(p.requests.num_accepted + in.slot); // live: past any L1 copy
      const RowDecision d = decide_row<K, Clean>(p, b, in);
      team.sync(); // every thread of this program has read a before it writes the reset
      if (owns_first_unit && d.reset && team.rank() == 0) p.requests.num_accepted[d.slot] = 1;
      return d.copy;
    }
  }
};

struct reset_not_written : Clean {
  static MC_HD_INLINE bool save_resets(bool /*same_col*/, bool /*copies*/) { return false; }
};

struct reset_on_every_copy : Clean {
  static MC_HD_INLINE bool save_resets(bool same_col, bool copies) { return same_col || copies; }
};

struct same_column_copied : Clean {
  static MC_HD_INLINE bool save_copies(bool /*same_col*/, std::int32_t /*bias*/) { return true; }
};

struct precopy_ignores_token_bias : Clean {
  static MC_HD_INLINE std::int32_t precopy_bias(std::int32_t /*token_bias*/) { return 0; }
};

struct preprocess_curr_floor : Clean {
  static MC_HD_INLINE std::int64_t preprocess_column(std::int64_t tokens_after,
                                                     std::int32_t block_size) {
    return tokens_after / block_size - 1;
  }
};

struct preprocess_bias_is_accepted : Clean {
  static MC_HD_INLINE std::int32_t preprocess_token_bias(std::int32_t a) { return a; }
};

struct preprocess_reset_when_fresh : Clean {
  static MC_HD_INLINE bool preprocess_resets_accepted(std::int32_t old_col, std::int64_t new_col) {
    return Clean::preprocess_resets_accepted(old_col, new_col) || old_col < 0;
  }
};

struct preprocess_src_after_update : Clean {
  static MC_HD_INLINE std::int32_t preprocess_source_column(std::int32_t /*old_col*/,
                                                            std::int32_t new_col) {
    return new_col;
  }
};

// --- Copy geometry

struct block_offset_32bit : Clean {
  static MC_HD_INLINE std::uint64_t block_address(std::uint64_t base, std::int32_t block_id,
                                                  std::int64_t stride_bytes) {
    // The product wraps at 2^32.
    return base + static_cast<std::uint32_t>(static_cast<std::int64_t>(block_id) * stride_bytes);
  }
};

struct conv_one_row_short : Clean {
  static MC_HD_INLINE std::int64_t conv_kept_tokens(std::int32_t conv_width, std::int32_t bias) {
    return max64(Clean::conv_kept_tokens(conv_width, bias) - 1, 0);
  }
};

struct temporal_ignores_bias_column : Clean {
  static MC_HD_INLINE std::int32_t temporal_source_block(const GroupBlocks& blocks) {
    return blocks.conv_src;
  }
};

struct conv_source_at_bias_column : Clean {
  static MC_HD_INLINE ConvSource conv_source(const GroupBlocks& blocks,
                                             std::int64_t /*byte_offset*/) {
    return ConvSource{.block_id = blocks.temporal_src, .byte_offset = 0};
  }
};

struct sd_bias_in_elements : Clean {
  static MC_HD_INLINE std::int64_t sd_source_offset(const TensorDesc& t, std::int32_t bias) {
    return static_cast<std::int64_t>(bias) * t.elem_size;
  }
};

struct ds_tail_ignores_bias : Clean {
  static MC_HD_INLINE std::int64_t ds_source_offset(const TensorDesc& /*t*/,
                                                    std::int32_t /*bias*/) {
    return 0;
  }
};

// --- Moving the bytes

struct same_block_copy_skipped : Clean {
  static MC_HD_INLINE bool copy_moves_bytes(const TensorDesc& /*t*/, std::int32_t /*tensor*/,
                                            std::int32_t src_block_id, std::int32_t dst_block_id) {
    return src_block_id != dst_block_id;
  }
};

struct null_block_skipped : Clean {
  static MC_HD_INLINE bool copy_moves_bytes(const TensorDesc& /*t*/, std::int32_t /*tensor*/,
                                            std::int32_t src_block_id,
                                            std::int32_t /*dst_block_id*/) {
    return src_block_id != 0;
  }
};

struct only_first_tensor_copied : Clean {
  static MC_HD_INLINE bool copy_moves_bytes(const TensorDesc& /*t*/, std::int32_t tensor,
                                            std::int32_t /*src_block_id*/,
                                            std::int32_t /*dst_block_id*/) {
    return tensor == 0;
  }
};

struct tables_of_group0 : Clean {
  static MC_HD_INLINE std::int32_t table_group(std::int32_t /*group*/) { return 0; }
};

struct only_group0_copied : Clean {
  static MC_HD_INLINE bool copy_moves_bytes(const TensorDesc& t, std::int32_t /*tensor*/,
                                            std::int32_t /*src_block_id*/,
                                            std::int32_t /*dst_block_id*/) {
    return t.group == 0;
  }
};

struct overlap_copied_backwards : Clean {
  template <class Team>
  static MC_HD void move_flat(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes,
                              std::int32_t chunk) {
    if (!ranges_overlap(dst, src, bytes)) return Clean::move_flat(team, dst, src, bytes, chunk);
    if (chunk != 0 || team.rank() != 0) return;
    for (std::int64_t i = bytes - 1; i >= 0; --i) // from the top: wrong for dst < src
      store_at<std::uint8_t>(dst + static_cast<std::uint64_t>(i),
                             load_at<std::uint8_t>(src + static_cast<std::uint64_t>(i)));
  }
};

struct vector_tail_dropped : Clean {
  template <class Team>
  static MC_HD void move_flat(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes,
                              std::int32_t chunk) {
    if (((dst ^ src) & 15u) == 0) { // the vector path: stop at dst's last 16-byte boundary
      const std::uint64_t end = (dst + static_cast<std::uint64_t>(bytes)) & ~std::uint64_t{15};
      bytes = end > dst ? static_cast<std::int64_t>(end - dst) : 0;
    }
    Clean::move_flat(team, dst, src, bytes, chunk);
  }
};

struct vector_head_dropped : Clean {
  template <class Team>
  static MC_HD void move_flat(Team team, std::uint64_t dst, std::uint64_t src, std::int64_t bytes,
                              std::int32_t chunk) {
    if (((dst ^ src) & 15u) == 0) { // the vector path: start at dst's first 16-byte boundary
      const std::int64_t head = min64(bytes, static_cast<std::int64_t>((16u - (dst & 15u)) & 15u));
      dst += static_cast<std::uint64_t>(head);
      src += static_cast<std::uint64_t>(head);
      bytes -= head;
    }
    Clean::move_flat(team, dst, src, bytes, chunk);
  }
};

struct ds_shift_backwards : Clean {
  // A same-block row shift done from the last element of each row.
  template <class Team> static MC_HD void move_ds_rows(Team team, const DsRows& r) {
    if (r.dst_block != r.src_block || r.bias_bytes <= 0) return Clean::move_ds_rows(team, r);
    if (team.rank() != 0) return;
    for (std::int64_t row = r.row_begin; row < r.row_end; ++row) {
      const std::uint64_t at = static_cast<std::uint64_t>(row * r.row_stride_bytes);
      for (std::int64_t j = r.tail_bytes - 1; j >= 0; --j)
        store_at<std::uint8_t>(
            r.dst_block + at + static_cast<std::uint64_t>(j),
            load_at<std::uint8_t>(r.src_block + at + static_cast<std::uint64_t>(r.bias_bytes + j)));
    }
  }
};

struct batch_copy_drops_last : Clean {
  static MC_HD_INLINE bool copies_triple(std::int64_t i, std::int64_t num_triples) {
    return i != num_triples - 1;
  }
};

// --- Out of bounds (MC_KERNEL_MUTANTS_OUT_OF_BOUNDS: not memory-safe)

// The table row of the slot: with a slot >= num_reqs the read is past the end of the table.
// V1 kinds pass their row as the slot (row_slot), and per-slot tables are read at the slot
// anyway, so those read what the clean kernels read.
struct table_row_from_slot : Clean {
  static MC_HD_INLINE std::int32_t table_row(const FusedParams& /*p*/, std::int32_t /*b*/,
                                             std::int32_t slot) {
    return slot;
  }
};

// The seed's lookup kept where the launch hands the kernels per-slot tables (#55506 changed
// the tables the runner binds but not this line): row b of a table whose rows are slots is
// another request's row, or a free slot's, which may hold pads past its last block.
struct slot_table_row_from_batch_row : Clean {
  static MC_HD_INLINE std::int32_t table_row(const FusedParams& /*p*/, std::int32_t b,
                                             std::int32_t /*slot*/) {
    return b;
  }
};

// The `src_col < 0` half of precopy's skip dropped: a row without a source copies from column
// -1, before its table row. The V1 runner marks every row that copies nothing with src_col -1,
// so there it is nearly every row of every step; V2 only fresh requests have -1.
struct precopy_copies_without_source : Clean {
  static MC_HD_INLINE bool precopy_copies(const FusedParams& /*p*/, std::int32_t /*b*/,
                                          std::int32_t src_col, std::int32_t dst_col) {
    return src_col != dst_col;
  }
};

// The mapping read unconditionally, as a kernel that forgets its HAS_IDX_MAPPING constexpr does:
// a V1 launch binds none, and the read goes through a null pointer. Volatile so that the
// compiler keeps a load whose value only guards the copy.
struct precopy_reads_unbound_idx_mapping : Clean {
  static MC_HD_INLINE bool precopy_copies(const FusedParams& p, std::int32_t b,
                                          std::int32_t src_col, std::int32_t dst_col) {
    const volatile std::int32_t* mapping = p.requests.idx_mapping;
    if (mapping[b] < -1) return false; // never: a slot is -1 (padding) or a row's
    return Clean::precopy_copies(p, b, src_col, dst_col);
  }
};

} // namespace mc::gpu::mutants

namespace mc::gpu {

// The kernels' policy for `M`: Clean for Mutant::none, else the mutant's own.
template <Mutant M> struct KernelPolicyOf;
template <> struct KernelPolicyOf<Mutant::none> { using type = Clean; };
#define MC_KERNEL_POLICY_OF(name, bug_class, schedule, description)                                \
  template <> struct KernelPolicyOf<Mutant::name> { using type = mutants::name; };
MC_KERNEL_MUTANTS(MC_KERNEL_POLICY_OF)
#undef MC_KERNEL_POLICY_OF

template <Mutant M> using KernelPolicy = typename KernelPolicyOf<M>::type;

// A policy type passed as a value (`typename decltype(tag)::type` names it).
template <class Policy> struct PolicyTag { using type = Policy; };

// Calls `f(PolicyTag<P>{})` with the policy of the runtime `mutant`: the one switch from a
// selected mutant to its kernels' instantiation (visit_mutant, generated from the list).
template <class F> decltype(auto) visit_kernel_policy(Mutant mutant, F&& f) {
  return visit_mutant(mutant, [&](auto m) -> decltype(auto) {
    return f(PolicyTag<KernelPolicy<decltype(m)::value>>{});
  });
}

} // namespace mc::gpu
