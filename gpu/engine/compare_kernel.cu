#include "gpu/engine/compare_launch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mc::gpu::engine {
namespace {

constexpr int kCompareThreads = kCompareTileBytes / kCompareWordsPerThread / 8;
constexpr std::int64_t kCompareCtasMax = std::int64_t{1} << 16;

// The range whose tiles hold tile `tile`: the last start at or before it.
__device__ std::int32_t range_of_tile(const CompareParams& p, std::int64_t tile) {
  std::int32_t lo = 0;
  std::int32_t hi = p.num_ranges; // tile_starts[lo] <= tile < tile_starts[hi]
  while (hi - lo > 1) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (p.tile_starts[mid] <= tile)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Bytes [k, end) of range `r` (at most 8), one by one: the first that differs, or -1.
__device__ std::int64_t first_byte_difference(const CompareParams& p, const model::ExpectedRange& r,
                                              const unsigned char* bytes, std::int64_t k,
                                              std::int64_t end) {
  for (; k < end; ++k)
    if (bytes[k] != model::expected_byte(r, p.rows, p.poison, k)) return k;
  return -1;
}

// The 8 bytes at k of a temporal range whose words are aligned: one load, one stamp.
__device__ std::int64_t first_word_difference(const model::ExpectedRange& r,
                                              const unsigned char* bytes, std::int64_t k) {
  const std::uint64_t got = *reinterpret_cast<const std::uint64_t*>(bytes + k);
  const std::uint64_t diff = got ^ model::temporal_value(r.seed, k / 8);
  if (diff == 0) return -1;
  return k +
         (__ffsll(static_cast<long long>(diff)) - 1) / 8; // little-endian: the lowest byte first
}

// CTA c compares tiles c, c + grid, ...: a tile is kCompareTileBytes of one range, its threads
// taking consecutive words (the loads of a warp are contiguous). A temporal range whose
// bytes are 8-aligned is compared a word at a time; poison, conv states and unaligned or
// short tails byte by byte (model::expected_byte).
__global__ void __launch_bounds__(kCompareThreads)
    compare_kernel(const CompareParams p, const std::int64_t num_tiles) {
  __shared__ std::int32_t range;
  for (std::int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    __syncthreads(); // every thread is done with the previous tile's range
    if (threadIdx.x == 0) range = range_of_tile(p, tile);
    __syncthreads();
    const model::ExpectedRange& r = p.ranges[range];
    const auto* bytes =
        reinterpret_cast<const unsigned char*>(p.arena_addrs[r.range.arena]) + r.range.offset_bytes;
    const bool words =
        r.kind == model::ExpectedKind::temporal && reinterpret_cast<std::uintptr_t>(bytes) % 8 == 0;
    const std::int64_t tile_begin = (tile - p.tile_starts[range]) * kCompareTileBytes;
    for (int j = 0; j < kCompareWordsPerThread; ++j) {
      const std::int64_t k = tile_begin + 8 * (std::int64_t{j} * blockDim.x + threadIdx.x);
      if (k >= r.range.size_bytes) break;
      const std::int64_t end = std::min(k + 8, r.range.size_bytes);
      const std::int64_t at = words && end == k + 8 ? first_word_difference(r, bytes, k)
                                                    : first_byte_difference(p, r, bytes, k, end);
      if (at >= 0) atomicMin(p.first + range, static_cast<unsigned long long>(at));
    }
  }
}

} // namespace

void launch_compare(const CompareParams& params, std::int64_t num_tiles, void* stream) {
  if (num_tiles == 0) return;
  const std::int64_t ctas = std::min(num_tiles, kCompareCtasMax);
  compare_kernel<<<static_cast<unsigned>(ctas), kCompareThreads, 0,
                   static_cast<cudaStream_t>(stream)>>>(params, num_tiles);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA launch of compare_kernel failed: ") +
                             cudaGetErrorString(err));
}

} // namespace mc::gpu::engine
