/* Memory primitives and the "team" that runs one program.
 *
 * A program body (one CTA on the GPU) is written against a Team: rank(), size() and
 * sync(). On the device the team is the CTA (threadIdx.x, blockDim.x, __syncthreads);
 * on the host it is one thread (rank 0, size 1, sync a no-op), so the host backend runs
 * exactly the same bodies one program after another in grid order (DESIGN.md).
 *
 * Loads and stores take unsigned 64-bit byte addresses (class B: a device address can be
 * >= 2^63 when seen as signed). On the host they go through memcpy, so reading arena
 * bytes as wider words breaks no aliasing rule; on the device they are plain global
 * accesses of the given width (the callers guarantee alignment).
 */
#pragma once

#include "gpu/hd.h"

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

namespace mc::gpu {

struct alignas(16) Bytes16 {
  std::uint32_t w[4];
};

template <class V> MC_HD_INLINE V load_at(std::uint64_t addr) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(V) == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(addr);
    return V{{v.x, v.y, v.z, v.w}};
  } else {
    return *reinterpret_cast<const V*>(addr);
  }
#else
  V v;
  std::memcpy(&v, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(addr)), sizeof(V));
  return v;
#endif
}

template <class V> MC_HD_INLINE void store_at(std::uint64_t addr, const V& v) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(V) == 16) {
    *reinterpret_cast<uint4*>(addr) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
  } else {
    *reinterpret_cast<V*>(addr) = v;
  }
#else
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), &v, sizeof(V));
#endif
}

// Block id (int32) times stride in 64 bits, then unsigned: never wraps at 2^31 (class B).
MC_HD_INLINE std::uint64_t block_addr(std::uint64_t base, std::int32_t block_id,
                                      std::int64_t stride_bytes) {
  return base + static_cast<std::uint64_t>(static_cast<std::int64_t>(block_id) * stride_bytes);
}

MC_HD_INLINE std::int64_t min64(std::int64_t a, std::int64_t b) {
  return a < b ? a : b;
}
MC_HD_INLINE std::int64_t max64(std::int64_t a, std::int64_t b) {
  return a > b ? a : b;
}

// Python floor division (the seeds' `//`), for possibly negative numerators.
MC_HD_INLINE std::int64_t floor_div64(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// One host thread running a program alone.
struct HostTeam {
  MC_HD_INLINE int rank() const { return 0; }
  MC_HD_INLINE int size() const { return 1; }
  MC_HD_INLINE void sync() const {}
  MC_HD_INLINE int fetch_add(int* counter, int value) const {
    const int old = *counter;
    *counter += value;
    return old;
  }
};

// The threads of one CTA. Only instantiated in device code.
struct CtaTeam {
#if defined(__CUDA_ARCH__)
  __device__ __forceinline__ int rank() const {
    return static_cast<int>(threadIdx.x);
  }
  __device__ __forceinline__ int size() const {
    return static_cast<int>(blockDim.x);
  }
  __device__ __forceinline__ void sync() const {
    __syncthreads();
  }
  __device__ __forceinline__ int fetch_add(int* counter, int value) const {
    return atomicAdd(counter, value); // a shared-memory counter
  }
#else
  MC_HD_INLINE int rank() const {
    return 0;
  }
  MC_HD_INLINE int size() const {
    return 1;
  }
  MC_HD_INLINE void sync() const {}
  MC_HD_INLINE int fetch_add(int* counter, int value) const {
    const int old = *counter;
    *counter += value;
    return old;
  }
#endif
};

// Reads of data another CTA of the same launch published (bypass the incoherent L1).
template <class T> MC_HD_INLINE T load_published(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *p;
#endif
}

} // namespace mc::gpu
