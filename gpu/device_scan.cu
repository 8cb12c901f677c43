#include "gpu/device_scan.h"

#include <cuda_runtime.h>

namespace mc::gpu {
namespace {

constexpr int kThreads = 256;

// One block per chunk: every thread ORs 16-byte words, the block agrees with one barrier.
__global__ void nonzero_chunks_kernel(const uint4* data, std::int64_t size_bytes,
                                      std::int64_t chunk_bytes, std::uint8_t* flags) {
  const std::int64_t chunk = blockIdx.x;
  const std::int64_t begin = chunk * chunk_bytes;
  const std::int64_t end = begin + chunk_bytes < size_bytes ? begin + chunk_bytes : size_bytes;
  const std::int64_t words_end = end / 16;
  unsigned any = 0;
  for (std::int64_t w = begin / 16 + threadIdx.x; w < words_end; w += blockDim.x) {
    const uint4 v = data[w];
    any |= v.x | v.y | v.z | v.w;
  }
  // A tail shorter than a word (a buffer size not a multiple of 16).
  if (threadIdx.x == 0)
    for (std::int64_t b = words_end * 16; b < end; ++b)
      any |= reinterpret_cast<const unsigned char*>(data)[b];
  const int found = __syncthreads_or(any != 0);
  if (threadIdx.x == 0) flags[chunk] = found ? 1 : 0;
}

} // namespace

int nonzero_chunks(const void* data, std::int64_t size_bytes, std::int64_t chunk_bytes,
                    std::uint8_t* flags) {
  const std::int64_t chunks = (size_bytes + chunk_bytes - 1) / chunk_bytes;
  if (chunks == 0) return cudaSuccess;
  // A grid's x dimension reaches 2^31 - 1 blocks: 128 TiB of 64 KiB chunks.
  nonzero_chunks_kernel<<<static_cast<unsigned>(chunks), kThreads>>>(
      static_cast<const uint4*>(data), size_bytes, chunk_bytes, flags);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  return err;
}

} // namespace mc::gpu
