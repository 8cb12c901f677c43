// Which chunks of a device buffer hold a non-zero byte, found on the device: a download then
// moves only those chunks instead of the whole buffer, and the host scans nothing.
#pragma once

#include <cstdint>

namespace mc::gpu {

// flags[i] (device memory, one byte per chunk) becomes 1 when bytes [i * chunk_bytes,
// min((i + 1) * chunk_bytes, size_bytes)) of `data` hold a non-zero byte, else 0.
// `data` is 16-byte aligned, chunk_bytes a multiple of 16. Synchronous; returns the launch's
// or the synchronization's error (cudaError_t as int, so callers need no CUDA header here).
int nonzero_chunks(const void* data, std::int64_t size_bytes, std::int64_t chunk_bytes,
                    std::uint8_t* flags);

} // namespace mc::gpu
