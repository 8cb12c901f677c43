// MC_HD marks the per-program kernel bodies that run on both sides: under nvcc they are
// __host__ __device__ (the cuda backend launches them, the host backend calls them); under a
// plain C++ compiler the macro is empty, so the host backend builds without CUDA headers.
#pragma once

#if defined(__CUDACC__)
#define MC_HD __host__ __device__
#define MC_HD_INLINE __host__ __device__ __forceinline__
#else
#define MC_HD
#define MC_HD_INLINE inline
#endif

// Loop unrolling hint for device code (g++ would warn about an unknown pragma).
#if defined(__CUDACC__)
#define MC_UNROLL _Pragma("unroll")
#else
#define MC_UNROLL
#endif
