// The device side of a comparison with expected bytes (model/expected_bytes.h), for the cuda
// engine executor: every byte of every range is made on the device from the oracle's
// description and compared with the arena's, and only the first differing byte of each range
// comes back. A step's written blocks then cost the device a read of them, not a transfer to
// the host, and so does the periodic sweep of the whole arenas. Host C++ calls it; nvcc compiles
// the kernel in compare_kernel.cu. A failed launch throws std::runtime_error.
#pragma once

#include "model/expected_bytes.h"

#include <cstdint>

namespace mc::gpu::engine {

// A CTA compares a tile of one range at a time, each thread kCompareWordsPerThread 8-byte
// words of it.
inline constexpr std::int64_t kCompareTileBytes = 8192;
inline constexpr int kCompareWordsPerThread = 4;

struct CompareParams {
  const model::ExpectedRange* ranges = nullptr;
  std::int32_t num_ranges = 0;
  const model::ExpectedRow* rows = nullptr;
  // Per range, its first tile (an exclusive prefix sum of its tiles); entry num_ranges is the
  // number of tiles.
  const std::int64_t* tile_starts = nullptr;
  const std::uint64_t* arena_addrs = nullptr; // device base address, by arena
  const std::uint8_t* poison = nullptr;       // model::kPoisonPeriod bytes
  // Per range, the first byte that differs; all ones where every byte holds (set by the caller).
  unsigned long long* first = nullptr;
};

// Launches the compare on `stream` (a cudaStream_t; nullptr: the default stream). Does not
// wait.
void launch_compare(const CompareParams& params, std::int64_t num_tiles, void* stream);

} // namespace mc::gpu::engine
