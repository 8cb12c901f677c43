/* The fused launch: decide once per request, then spread the copies over every CTA.
 *
 * Implements postprocess, postprocess_align(_slot_tables), precopy(_v1, _slot_tables) and
 * preprocess_align of model/LAUNCH_KINDS.md in ONE kernel launch (decisions in
 * gpu/kernels/decide.cuh, copies in gpu/kernels/state_copy.cuh):
 * 1. Each CTA learns its program index: its blockIdx.x under a cooperative launch (the
 *    default: every CTA is resident at once), else a ticket (an atomic counter, so tickets
 *    follow the order CTAs actually started; the last CTA resets it for the next launch).
 *    Programs 0..num_segments-1 are deciders: one thread per batch row decides (reading only
 *    launch-time values), writes the row's outputs, and for a copying row stores its columns,
 *    bias and the block ids of every group (one block-table read per group, not per state),
 *    then appends the row to its segment's active list. The segment is published by one
 *    64-bit flag word, this launch's epoch and the segment's active-row count (a release
 *    store when rows copy; threads that wrote a plan fence first). CTA i reads segment i's
 *    inputs before it knows its program, as it usually becomes that segment's decider.
 * 2. Every CTA waits for all segment flags (relaxed loads, then one acquire fence when any
 *    row copies). Deciders are resident (cooperative) or started before any CTA holding a
 *    later ticket, so the wait always ends, whatever the grid size.
 * 3. The work is active_rows x num_units units (a unit: <= kUnitBytes of one state's copy,
 *    see launch_plan.h); program k takes the k-th contiguous run of them. When no row
 *    crosses a block the launch ends right after step 2.
 * preprocess_align copies nothing: one CTA per segment, no program index to learn, no wait.
 * The host backend runs fused_program for programs 0, 1, ... in order with a one-thread
 * team: deciders come first, so every flag is set before a copier reads it.
 * Every body takes the kernels' Policy: Clean (gpu/kernels/clean_policy.cuh) or a mutant's.
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/decide.cuh"
#include "gpu/kernels/memory_ops.cuh"
#include "gpu/kernels/state_copy.cuh"

#include <cstdint>

namespace mc::gpu {

struct FusedShared {
  int ticket;
  int active_count;
  std::int64_t prefix[kSegmentsMax + 1]; // active rows before each segment
};

MC_HD_INLINE std::int32_t block_at(const FusedParams& p, std::int32_t group, std::int32_t row,
                                   std::int32_t col) {
  const std::int32_t* table =
      reinterpret_cast<const std::int32_t*>(static_cast<std::uintptr_t>(p.block_tables[group]));
  return table[static_cast<std::int64_t>(row) * p.block_table_row_stride + col];
}

// Columns, bias and per-group block ids of a copying row, for the copy units.
template <class Policy>
MC_HD_INLINE void store_row_plan(const FusedParams& p, std::int32_t b, const RowDecision& d) {
  std::int32_t* out = p.scratch.row_decisions + static_cast<std::int64_t>(b) * 4;
  out[0] = d.slot;
  out[1] = d.src_col;
  out[2] = d.dst_col;
  out[3] = d.bias;
  const std::int32_t row = Policy::table_row(p, b, d.slot);
  for (std::int32_t g = 0; g < p.num_groups; ++g) {
    const std::int32_t t = Policy::table_group(g);
    GroupBlocks blocks;
    if ((p.groups_with_conv >> g) & 1u) blocks.conv_src = block_at(p, t, row, d.src_col);
    if ((p.groups_with_temporal >> g) & 1u)
      blocks.temporal_src = block_at(p, t, row, d.src_col + d.bias);
    blocks.dst = block_at(p, t, row, d.dst_col);
    p.scratch.row_blocks[static_cast<std::int64_t>(b) * p.num_groups + g] = blocks;
  }
}

// The flag word of a published segment: this launch's epoch (never 0) and its active rows.
MC_HD_INLINE std::uint64_t segment_flag(std::uint32_t epoch, int active_rows) {
  return (std::uint64_t{epoch} << 32) | static_cast<std::uint32_t>(active_rows);
}

// Makes the segment's plan writes (by any thread of the team) visible before its flag: the
// threads that wrote fence, the team syncs, rank 0 stores the flag with release semantics. A
// segment with no active row has no plan to publish, so its flag is a relaxed store (the
// row outputs are read by the host after the kernel, never by another CTA).
template <class Team>
MC_HD_INLINE void publish_segment(const FusedParams& p, int seg, Team team, const FusedShared& sh,
                                  bool wrote_plan) {
#if defined(__CUDA_ARCH__)
  if (wrote_plan) __threadfence();
#else
  (void)wrote_plan;
#endif
  team.sync();
  if (team.rank() != 0) return;
  const std::uint64_t flag = segment_flag(p.epoch, sh.active_count);
#if defined(__CUDA_ARCH__)
  std::uint64_t* at = p.scratch.segment_flags + seg;
  if (sh.active_count > 0) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(at), "l"(flag) : "memory");
  } else {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(at), "l"(flag) : "memory");
  }
#else
  p.scratch.segment_flags[seg] = flag;
#endif
}

// The flag of segment `seg` once this launch published it (a relaxed load: the caller fences
// before it reads a plan).
MC_HD_INLINE std::uint64_t wait_segment(const FusedParams& p, int seg) {
#if defined(__CUDA_ARCH__)
  const std::uint64_t* at = p.scratch.segment_flags + seg;
  for (;;) {
    std::uint64_t flag;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(flag) : "l"(at) : "memory");
    if ((flag >> 32) == p.epoch) return flag;
    __nanosleep(64);
  }
#else
  return p.scratch.segment_flags[seg]; // the host runs every decider first
#endif
}

// Segment `seg`'s rows: decide, write outputs, store the plans of copying rows, publish.
// `first`, when given, holds the inputs of the rank's first row, read before the call.
template <KernelKind K, bool kRecord, class Policy, class Team>
MC_HD void decide_segment(const FusedParams& p, int seg, Team team, FusedShared& sh,
                          const RowInputs* first = nullptr) {
  constexpr bool kCopies = K != KernelKind::preprocess_align;
  const std::int32_t row0 = seg * kSegmentRows;
  const std::int32_t rows = static_cast<std::int32_t>(min64(kSegmentRows, p.num_reqs - row0));
  if (team.rank() == 0) sh.active_count = 0;
  team.sync();
  bool wrote_plan = false;
  for (std::int32_t r = team.rank(); r < rows; r += team.size()) {
    const std::int32_t b = row0 + r;
    const RowInputs in = r == team.rank() && first != nullptr ? *first : read_row<K>(p, b);
    const RowDecision d = decide_row<K, Policy>(p, b, in);
    write_row_outputs<K, Policy>(p, b, d);
    if (kCopies && d.copy) {
      store_row_plan<Policy>(p, b, d);
      p.scratch.active_rows[row0 + team.fetch_add(&sh.active_count, 1)] = b;
      wrote_plan = true;
    }
  }
  if constexpr (kCopies) publish_segment(p, seg, team, sh, wrote_plan);
}

// Waits until every segment of this launch is published, then sums the active rows. When any
// row copies, an acquire fence after the flag loads makes every published plan visible (the
// release stores pair with it); with nothing to copy no plan is read, and no fence is paid.
template <class Team> MC_HD void gather_segments(const FusedParams& p, Team team, FusedShared& sh) {
  if (team.rank() == 0) {
    sh.prefix[0] = 0;
    for (int seg = 0; seg < p.num_segments; ++seg)
      sh.prefix[seg + 1] =
          sh.prefix[seg] + static_cast<std::int64_t>(wait_segment(p, seg) & 0xFFFFFFFFu);
#if defined(__CUDA_ARCH__)
    if (sh.prefix[p.num_segments] > 0) asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
  }
  team.sync();
}

MC_HD_INLINE RowCopy load_row_copy(const FusedParams& p, const FusedShared& sh, std::int64_t k) {
  int seg = 0;
  while (sh.prefix[seg + 1] <= k)
    ++seg;
  RowCopy row;
  row.batch_row = load_published(p.scratch.active_rows + seg * kSegmentRows + (k - sh.prefix[seg]));
  const std::int32_t* d = p.scratch.row_decisions + static_cast<std::int64_t>(row.batch_row) * 4;
  row.slot = load_published(d);
  row.src_col = load_published(d + 1);
  row.dst_col = load_published(d + 2);
  row.bias = load_published(d + 3);
  return row;
}

MC_HD_INLINE GroupBlocks load_group_blocks(const FusedParams& p, std::int32_t b, std::int32_t g) {
  const GroupBlocks* src = p.scratch.row_blocks + static_cast<std::int64_t>(b) * p.num_groups + g;
  GroupBlocks blocks;
  blocks.conv_src = load_published(&src->conv_src);
  blocks.temporal_src = load_published(&src->temporal_src);
  blocks.dst = load_published(&src->dst);
  return blocks;
}

// Program `program` takes one contiguous run of the active_rows x num_units items, so the
// items of one row follow each other: the row's plan is loaded once and a group's block ids
// once per group, not once per unit (on an H200 this took 64 KiB-per-block copies from 0.84 to
// 0.87 of memcpy and nemotron-h-8b from 0.84 to 0.88, over the strided order before; on an
// H100 a unit-major order, strided over CTAs, gave 0.87 against 0.95 for nemotron-h-8b x 64).
template <KernelKind K, bool kRecord, class Policy, class Team>
MC_HD void copy_units(const FusedParams& p, int program, int num_programs, Team team,
                      const FusedShared& sh) {
  const std::int64_t total = sh.prefix[p.num_segments] * p.num_units;
  const std::int64_t share = (total + num_programs - 1) / num_programs;
  const std::int64_t begin = program * share;
  const std::int64_t end = min64(total, begin + share);
  std::int64_t row_k = -1;
  std::int32_t blocks_group = -1;
  bool copies_row = true;
  RowCopy row;
  GroupBlocks blocks;
  for (std::int64_t item = begin; item < end; ++item) {
    const std::int64_t k = item / p.num_units;
    if (k != row_k) {
      row = load_row_copy(p, sh, k);
      row_k = k;
      blocks_group = -1;
      copies_row =
          Policy::template program_copies_row<K>(p, row.batch_row, item == k * p.num_units, team);
    }
    if (!copies_row) continue;
    const UnitRef unit = p.units[item - k * p.num_units];
    const TensorDesc t = p.tensors[unit.tensor];
    if (t.group != blocks_group) {
      blocks = load_group_blocks(p, row.batch_row, t.group);
      blocks_group = t.group;
    }
    copy_state_unit<kRecord, Policy>(team, t, unit.tensor, unit.chunk, row, blocks,
                                     p.scratch.records, p.num_tensors);
  }
}

// One program (CTA) of the fused launch; `program` is its ticket.
template <KernelKind K, bool kRecord, class Policy, class Team>
MC_HD void fused_program(const FusedParams& p, int program, int num_programs, Team team,
                         FusedShared& sh, const RowInputs* first = nullptr) {
  if (program < p.num_segments) decide_segment<K, kRecord, Policy>(p, program, team, sh, first);
  if constexpr (K != KernelKind::preprocess_align) {
    gather_segments(p, team, sh);
    copy_units<K, kRecord, Policy>(p, program, num_programs, team, sh);
  }
}

#if defined(__CUDACC__)
template <KernelKind K, bool kRecord, class Policy>
__global__ void __launch_bounds__(kThreadsPerCta)
    fused_kernel(const __grid_constant__ FusedParams p) {
  __shared__ FusedShared sh;
  const CtaTeam team;
  if constexpr (K == KernelKind::preprocess_align) {
    decide_segment<K, kRecord, Policy>(p, static_cast<int>(blockIdx.x), team, sh);
  } else {
    if (p.start == FusedStart::cooperative) {
      if (threadIdx.x == 0) sh.ticket = static_cast<int>(blockIdx.x); // all CTAs resident
    } else if (threadIdx.x == 0) {
      const unsigned ticket = atomicAdd(p.scratch.ticket, 1u);
      if (ticket == gridDim.x - 1) atomicExch(p.scratch.ticket, 0u); // every CTA has one
      sh.ticket = static_cast<int>(ticket);
    }
    // While the ticket is on its way, CTA i reads the inputs of segment i's rows: CTAs mostly
    // start in index order, so it is usually that segment's decider. Reading early changes no
    // value: launch-time values are read either way, and only the decider writes them.
    const int guess = static_cast<int>(blockIdx.x);
    const std::int32_t row = guess * kSegmentRows + static_cast<std::int32_t>(threadIdx.x);
    const bool read_early = guess < p.num_segments && row < p.num_reqs;
    RowInputs first;
    if (read_early) first = read_row<K>(p, row);
    __syncthreads();
    fused_program<K, kRecord, Policy>(p, sh.ticket, static_cast<int>(gridDim.x), team, sh,
                                      sh.ticket == guess && read_early ? &first : nullptr);
  }
}

// The floor of any launch of this grid shape: starts and exits (bench only).
__global__ void __launch_bounds__(kThreadsPerCta) empty_kernel(int) {}

// Spins until the host releases it (bench only): the work queued behind it then runs back to
// back, without the host's submission latency between the timing events and the launches.
__global__ void latch_kernel(const volatile std::int32_t* release, std::int32_t* timed_out,
                             std::uint64_t timeout_ns) {
  const auto now = [] {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  };
  const std::uint64_t start = now();
  while (*release == 0) {
    if (now() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(256);
  }
}
#endif

} // namespace mc::gpu
