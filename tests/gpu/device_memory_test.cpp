// Arena transfers: what comes down is exactly what the device holds, however little of it the
// host ever touched. Compiled into CUDA builds only; skipped (never passed) without a device.
#include "gpu/cuda_backend.h"
#include "gpu/device_memory.h"
#include "gpu/device_scan.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace mc::gpu {
namespace {

#define MC_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";                                       \
  } while (0)

constexpr std::int64_t kChunk = std::int64_t{1} << 16;

// Writes one byte at `offset` of a device buffer, behind the host arena's back.
void poke(const DeviceBuffer& buffer, std::int64_t offset, std::byte value) {
  ASSERT_EQ(cudaMemcpy(static_cast<std::byte*>(buffer.data()) + offset, &value, 1,
                       cudaMemcpyHostToDevice),
            cudaSuccess);
}

TEST(DeviceScan, FlagsExactlyTheChunksHoldingANonZeroByte) {
  MC_REQUIRE_GPU();
  // Five chunks and 3 bytes: the last chunk is short and its last bytes are not a 16-byte word.
  const std::int64_t size = 5 * kChunk + 3;
  const DeviceBuffer buffer(size);
  const DeviceBuffer flags(6);
  poke(buffer, kChunk - 1, std::byte{1});     // last byte of chunk 0
  poke(buffer, 2 * kChunk, std::byte{0x80});  // first byte of chunk 2
  poke(buffer, size - 1, std::byte{7});       // the tail byte of chunk 5
  ASSERT_EQ(nonzero_chunks(buffer.data(), size, kChunk, flags.as<std::uint8_t>()), 0);
  EXPECT_EQ(download_vector<std::uint8_t>(flags, 6), (std::vector<std::uint8_t>{1, 0, 1, 0, 0, 1}));
}

// A buffer freed by this process is handed out again for the next request of its size: it must
// come back zeroed, whatever the last owner left in it.
TEST(DeviceMemory, AReusedBufferStartsZeroed) {
  MC_REQUIRE_GPU();
  const std::int64_t size = 3 * kChunk + 5;
  void* first = nullptr;
  {
    const DeviceBuffer dirty(size);
    first = dirty.data();
    ASSERT_EQ(cudaMemset(dirty.data(), 0xA5, static_cast<std::size_t>(size)), cudaSuccess);
  }
  const DeviceBuffer again(size);
  if (device_buffer_reuse()) {
    EXPECT_EQ(again.data(), first); // the kept one, not a fresh one
  }
  const std::vector<std::uint8_t> bytes =
      download_vector<std::uint8_t>(again, static_cast<std::size_t>(size));
  EXPECT_EQ(bytes, std::vector<std::uint8_t>(static_cast<std::size_t>(size), 0));
  // Another size never gets it.
  const DeviceBuffer other(size + 1);
  EXPECT_NE(other.data(), again.data());
}

// The benchmark resets the device between its cases: a buffer kept for reuse before the reset
// must not be handed out after it (the reset freed it), and a fresh one must work.
TEST(DeviceMemory, AResetDropsTheKeptBuffers) {
  MC_REQUIRE_GPU();
  const std::int64_t size = 2 * kChunk + 7;
  { const DeviceBuffer kept(size); } // kept for reuse, where reuse is on
  reset_device();
  const DeviceBuffer after(size); // cudaMemset of a stale pointer would throw here
  ASSERT_EQ(cudaMemset(after.data(), 0x5A, static_cast<std::size_t>(size)), cudaSuccess);
  const std::vector<std::uint8_t> bytes =
      download_vector<std::uint8_t>(after, static_cast<std::size_t>(size));
  EXPECT_EQ(bytes, std::vector<std::uint8_t>(static_cast<std::size_t>(size), 0x5A));
}

TEST(DeviceMemory, DownloadBringsEveryByteTheDeviceHolds) {
  MC_REQUIRE_GPU();
  // A sparse arena past 4 GiB would take the test's time; 64 chunks show the same paths.
  const std::int64_t size = 64 * kChunk + 40;
  model::Arena host(size);
  for (std::int64_t i = 0; i < 100; ++i)
    host.data()[3 * kChunk + i] = std::byte{static_cast<unsigned char>(i + 1)};
  const DeviceBuffer device = upload_arena(host);
  // A kernel's stray write far from anything the host touched, and one that zeroes a byte the
  // host wrote: both must show.
  poke(device, 40 * kChunk + 17, std::byte{0x5a});
  poke(device, 3 * kChunk + 5, std::byte{0});
  const model::Arena back = download_arena(device);
  model::Arena want(size);
  for (std::int64_t i = 0; i < 100; ++i)
    want.data()[3 * kChunk + i] = std::byte{static_cast<unsigned char>(i + 1)};
  want.data()[3 * kChunk + 5] = std::byte{0};
  want.data()[40 * kChunk + 17] = std::byte{0x5a};
  EXPECT_EQ(back.first_difference(want), -1);
  EXPECT_EQ(want.first_difference(back), -1);
}

} // namespace
} // namespace mc::gpu
