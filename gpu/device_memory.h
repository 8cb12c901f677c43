// Device memory for the cuda backend and the benchmark: an owning buffer, typed uploads and
// downloads, and sparse arena transfers (only non-zero chunks of a host arena travel up;
// only non-zero chunks are written into the host arena coming down, so a 5 GiB arena that
// is mostly untouched stays sparse on both sides). Errors throw model::EnvironmentError.
#pragma once

#include "model/arena.h"

#include <cstdint>
#include <span>
#include <vector>

namespace mc::gpu {

class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::int64_t size_bytes); // zero-filled
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::uint64_t address() const { return reinterpret_cast<std::uint64_t>(data_); }
  void* data() const { return data_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }
  std::int64_t size_bytes() const { return size_bytes_; }

private:
  void* data_ = nullptr;
  std::int64_t size_bytes_ = 0;
};

void upload_bytes(const DeviceBuffer& dst, const void* src, std::int64_t bytes);
void download_bytes(void* dst, const DeviceBuffer& src, std::int64_t bytes);

template <class T> DeviceBuffer upload_vector(std::span<const T> values) {
  DeviceBuffer buffer(static_cast<std::int64_t>(values.size_bytes()));
  upload_bytes(buffer, values.data(), static_cast<std::int64_t>(values.size_bytes()));
  return buffer;
}

template <class T> std::vector<T> download_vector(const DeviceBuffer& src, std::size_t count) {
  std::vector<T> out(count);
  download_bytes(out.data(), src, static_cast<std::int64_t>(count * sizeof(T)));
  return out;
}

// A device copy of `arena` (zero where the host arena is zero, chunk by chunk).
DeviceBuffer upload_arena(const model::Arena& arena);
// The device arena back into a fresh host arena, skipping all-zero chunks.
model::Arena download_arena(const DeviceBuffer& buffer);

bool device_present();

// cudaDeviceReset, after dropping the buffers kept for reuse: a reset frees every allocation of
// the context, and a kept pointer handed out after it would name memory the device no longer
// has (cudaMemset then fails with cudaErrorInvalidValue). Every reset in this program goes
// through here.
void reset_device();

// Whether freed buffers are kept for the next request of their size (MC_DEVICE_BUFFER_REUSE,
// on unless set to off; any other value throws model::InputError).
bool device_buffer_reuse();

} // namespace mc::gpu
