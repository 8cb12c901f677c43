// MC_HD marks the functions that run on both sides: the per-program kernel bodies (the cuda
// backend launches them, the host backend calls them) and the stamp functions of
// model/stamps.h (the oracle's forward and the forward kernel compute the same values from
// one definition). Under nvcc they are __host__ __device__; under a plain C++ compiler the
// macro is empty, so model/ and the host backend build without CUDA headers.
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
