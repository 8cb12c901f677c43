// Kernel launches with plain-struct arguments, so host C++ (compiled by g++) can launch the
// kernels compiled by nvcc in kernel_launch.cu. Every launch is followed by a check of
// cudaGetLastError (MC_CUDA_CHECK). `stream` is a cudaStream_t.
#pragma once

#include "gpu/device_types.h"
#include "gpu/mutant.h"

#include <cstdint>

namespace mc::gpu {

// CTAs for the fused kernel of this device: enough to fill every SM several times.
int fused_programs_max();

// The fused kernel (decide + copy) of `kind`; `num_programs` from fused_program_count.
void launch_fused(KernelKind kind, bool record, Mutant mutant, const FusedParams& params,
                  int num_programs, void* stream);

// An empty kernel of `num_programs` CTAs: the floor any launch of that shape pays (bench).
void launch_empty(int num_programs, void* stream);

// Holds `stream` until `*release` (mapped host memory) turns non-zero, or `timeout_ns` passed;
// it then sets `*timed_out` to 1 (bench timing: bench/kernel_bench_device.h, Timing::queued).
void launch_latch(const volatile std::int32_t* release, std::int32_t* timed_out,
                  std::uint64_t timeout_ns, void* stream);

// The batched flat copy over `params.triples` (device memory).
void launch_batch_copy(Mutant mutant, const BatchCopyParams& params, void* stream);

} // namespace mc::gpu
