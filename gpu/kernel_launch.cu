// Instantiations and launches of the kernels (gpu/kernels/*.cuh).
#include "gpu/kernel_launch.h"
#include "gpu/kernels/batch_copy.cuh"
#include "gpu/kernels/fused_launch.cuh"
#include "gpu/kernels/mutant_policies.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

namespace mc::gpu {
namespace {

// A launch failure becomes std::runtime_error here (no fmt in nvcc-compiled code); the
// backend turns it into model::EnvironmentError.
void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA launch of ") + what +
                             " failed: " + cudaGetErrorString(err));
}

constexpr int kCtasPerSm = 4;

// Calls f(PolicyTag<P>) with the kernels' policy for `mutant`. A build configured with
// -DMC_CUDA_KERNEL_MUTANTS=OFF (MC_NO_CUDA_KERNEL_MUTANTS: one instantiation per kernel instead
// of 26, for fast nvcc iterations on the kernels) has only the clean kernels and refuses a
// mutant.
template <class F> void visit_launch_policy(Mutant mutant, F&& f) {
#if defined(MC_NO_CUDA_KERNEL_MUTANTS)
  if (mutant != Mutant::none)
    throw std::runtime_error("this build has no cuda kernel mutants (configured with "
                             "-DMC_CUDA_KERNEL_MUTANTS=OFF)");
  f(PolicyTag<Clean>{});
#else
  visit_kernel_policy(mutant, std::forward<F>(f));
#endif
}

// An attribute of the current device; `what` names it in the error.
int device_attribute(cudaDeviceAttr attr, const char* what) {
  int device = 0;
  int value = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: cannot read the ") + what);
  return value;
}

// CTAs of `kernel` that can be resident at once on this device (a cooperative grid's limit).
template <class Kernel> int resident_ctas_max(Kernel kernel) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreadsPerCta, 0) !=
      cudaSuccess)
    throw std::runtime_error("CUDA: cannot read the occupancy of fused_kernel");
  return device_attribute(cudaDevAttrMultiProcessorCount, "multiprocessor count") * per_sm;
}

// A cooperative launch where asked and supported (the grid cut to what fits at once: the
// kernel takes its share of the work from gridDim), else tickets over the full grid.
template <KernelKind K, bool kRecord, class Policy>
void launch_fused_kind(const FusedParams& p, int num_programs, cudaStream_t stream) {
  static const bool cooperative_supported =
      device_attribute(cudaDevAttrCooperativeLaunch, "cooperative launch attribute") != 0;
  if (p.start == FusedStart::cooperative && cooperative_supported &&
      K != KernelKind::preprocess_align) {
    static const int resident_max = resident_ctas_max(fused_kernel<K, kRecord, Policy>);
    const int grid = std::min(num_programs, resident_max);
    FusedParams params = p;
    void* args[] = {&params};
    const cudaError_t err = cudaLaunchCooperativeKernel(
        reinterpret_cast<const void*>(fused_kernel<K, kRecord, Policy>),
        dim3(static_cast<unsigned>(grid)), dim3(kThreadsPerCta), args, 0, stream);
    if (err != cudaSuccess)
      throw std::runtime_error(std::string("CUDA cooperative launch of fused_kernel failed: ") +
                               cudaGetErrorString(err));
    return;
  }
  FusedParams params = p;
  params.start = FusedStart::ticket;
  fused_kernel<K, kRecord, Policy><<<num_programs, kThreadsPerCta, 0, stream>>>(params);
  check_launch("fused_kernel");
}

template <bool kRecord, class Policy>
void launch_fused_variant(KernelKind kind, const FusedParams& p, int n, cudaStream_t s) {
  switch (kind) {
  case KernelKind::postprocess:
    return launch_fused_kind<KernelKind::postprocess, kRecord, Policy>(p, n, s);
  case KernelKind::postprocess_align:
    return launch_fused_kind<KernelKind::postprocess_align, kRecord, Policy>(p, n, s);
  case KernelKind::precopy:
    return launch_fused_kind<KernelKind::precopy, kRecord, Policy>(p, n, s);
  case KernelKind::preprocess_align:
    return launch_fused_kind<KernelKind::preprocess_align, kRecord, Policy>(p, p.num_segments, s);
  }
}

// One instantiation per kernel policy (gpu/kernels/mutant_policies.cuh). Mutants are compared
// through their recorded decisions, so only the recording launch has them; the launch without
// records (bench) is the clean kernel only.
template <bool kRecord>
void launch_fused_record(Mutant mutant, KernelKind kind, const FusedParams& p, int n,
                         cudaStream_t s) {
  if constexpr (kRecord) {
    visit_launch_policy(mutant, [&](auto policy) {
      launch_fused_variant<kRecord, typename decltype(policy)::type>(kind, p, n, s);
    });
  } else {
    if (mutant != Mutant::none)
      throw std::runtime_error("a kernel mutant needs the recording launch");
    launch_fused_variant<kRecord, Clean>(kind, p, n, s);
  }
}

} // namespace

int fused_programs_max() {
  return std::max(1, device_attribute(cudaDevAttrMultiProcessorCount, "multiprocessor count") *
                         kCtasPerSm);
}

void launch_empty(int num_programs, void* stream) {
  if (num_programs <= 0) return;
  empty_kernel<<<num_programs, kThreadsPerCta, 0, static_cast<cudaStream_t>(stream)>>>(0);
  check_launch("empty_kernel");
}

void launch_latch(const volatile std::int32_t* release, std::int32_t* timed_out,
                  std::uint64_t timeout_ns, void* stream) {
  latch_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(release, timed_out, timeout_ns);
  check_launch("latch_kernel");
}

void launch_fused(KernelKind kind, bool record, Mutant mutant, const FusedParams& params,
                  int num_programs, void* stream) {
  if (num_programs <= 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (record) {
    launch_fused_record<true>(mutant, kind, params, num_programs, s);
  } else {
    launch_fused_record<false>(mutant, kind, params, num_programs, s);
  }
}

void launch_batch_copy(Mutant mutant, const BatchCopyParams& params, void* stream) {
  if (params.num_units <= 0) return;
  const auto grid = static_cast<int>(
      std::min<std::int64_t>(params.num_units, static_cast<std::int64_t>(fused_programs_max())));
  const auto s = static_cast<cudaStream_t>(stream);
  visit_launch_policy(mutant, [&](auto policy) {
    batch_copy_kernel<typename decltype(policy)::type><<<grid, kThreadsPerCta, 0, s>>>(params);
  });
  check_launch("batch_copy_kernel");
}

} // namespace mc::gpu
