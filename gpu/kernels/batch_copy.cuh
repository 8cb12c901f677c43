/* The batched flat copy of V1's copy plan (launch kind batch_copy, model/LAUNCH_KINDS.md).
 *
 * The host turns each copying request's states into flat (src address, dst address,
 * bytes) triples, as the seed's copy specs do (gpu/launch_plan.h); this kernel applies a
 * list of them. Triple i owns work units [first_unit, first_unit + units(i)) of
 * kUnitBytes; a CTA takes units program, program + grid, ... and finds its triple by
 * binary search over first_unit. A triple whose ranges overlap (a same-block shift) is
 * copied whole by its unit 0 with memmove semantics (byte_copy.cuh).
 */
#pragma once

#include "gpu/device_types.h"
#include "gpu/hd.h"
#include "gpu/kernels/byte_copy.cuh"
#include "gpu/kernels/clean_policy.cuh"
#include "gpu/kernels/memory_ops.cuh"

#include <cstdint>

namespace mc::gpu {

// Work units of one flat copy (at least one, so 0-byte triples still own a unit).
MC_HD_INLINE std::int64_t flat_copy_units(std::int64_t bytes) {
  return bytes <= kUnitBytes ? 1 : (bytes + kUnitBytes - 1) / kUnitBytes;
}

// The triple owning work unit `unit`: the last one whose first_unit <= unit.
MC_HD_INLINE std::int64_t find_triple(const BatchCopyParams& p, std::int64_t unit) {
  std::int64_t lo = 0;
  std::int64_t hi = p.num_triples - 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (p.triples[mid].first_unit <= unit) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

template <class Policy, class Team>
MC_HD void batch_copy_program(const BatchCopyParams& p, std::int64_t program,
                              std::int64_t num_programs, Team team) {
  for (std::int64_t unit = program; unit < p.num_units; unit += num_programs) {
    const std::int64_t i = find_triple(p, unit);
    if (!Policy::copies_triple(i, p.num_triples)) continue;
    const CopyTriple t = p.triples[i];
    copy_flat_chunk(team, t.dst_addr, t.src_addr, t.bytes, unit - t.first_unit, kUnitBytes);
  }
}

#if defined(__CUDACC__)
template <class Policy>
__global__ void __launch_bounds__(kThreadsPerCta)
    batch_copy_kernel(const __grid_constant__ BatchCopyParams p) {
  batch_copy_program<Policy>(p, blockIdx.x, gridDim.x, CtaTeam{});
}
#endif

} // namespace mc::gpu
