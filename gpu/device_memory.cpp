#include "gpu/device_memory.h"

#include "gpu/cuda_check.h"
#include "gpu/device_scan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mc::gpu {
namespace {

constexpr std::int64_t kChunkBytes = std::int64_t{1} << 16;   // sparse granularity

bool all_zero(const std::byte* p, std::int64_t n) {
  static const std::vector<std::byte> zeros(static_cast<std::size_t>(kChunkBytes));
  return std::memcmp(p, zeros.data(), static_cast<std::size_t>(n)) == 0;
}

// Allocations freed by this process, kept for the next request of the same size. A case makes
// and frees a dozen buffers (arenas, tables, requests, scratch), and under MPS every cudaMalloc
// and cudaFree is a round trip to the one server that all of a GPU's case workers share. Exact
// sizes only, so a reused buffer ends where a fresh one of that size would; every buffer is
// zeroed when handed out, fresh or reused, as before. Small buffers only and a bounded total,
// so the workers sharing a GPU cannot hold its memory; on an allocation failure everything
// kept is freed and the allocation tried again. MC_DEVICE_BUFFER_REUSE=off frees every buffer at
// once instead: under compute-sanitizer, whose memcheck must see a write past a buffer land in
// freed memory, and whose leak check would count the kept ones.
class FreedBuffers {
public:
  static constexpr std::int64_t kBufferBytesMax = std::int64_t{64} << 20;
  static constexpr std::int64_t kKeptBytesMax = std::int64_t{512} << 20;
  // And at most this share of the device's memory a process: 16 workers on a 24 GB GPU then
  // keep under 3 GiB between them (each frees only its own when an allocation fails).
  static constexpr std::int64_t kKeptShareOfDevice = 128;

  void* take(std::int64_t size_bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = kept_.find(size_bytes);
    if (it == kept_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    kept_bytes_ -= size_bytes;
    return p;
  }
  // False: not kept (too big, or the bound is reached); the caller frees it.
  bool keep(void* p, std::int64_t size_bytes) {
    if (!device_buffer_reuse()) return false;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (kept_max_ < 0) {
      std::size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        kept_max_ = std::min(kKeptBytesMax,
                             static_cast<std::int64_t>(total_bytes) / kKeptShareOfDevice);
      } else {
        kept_max_ = 0;            // nothing kept where the device cannot say its size
        (void)cudaGetLastError(); // this failure is not the caller's to see
      }
    }
    if (size_bytes > kBufferBytesMax || kept_bytes_ + size_bytes > kept_max_) return false;
    kept_[size_bytes].push_back(p);
    kept_bytes_ += size_bytes;
    return true;
  }
  void free_all() {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, pointers] : kept_)
      for (void* p : pointers)
        (void)cudaFree(p);
    kept_.clear();
    kept_bytes_ = 0;
  }

private:
  std::mutex mutex_;
  std::unordered_map<std::int64_t, std::vector<void*>> kept_;
  std::int64_t kept_bytes_ = 0;
  std::int64_t kept_max_ = -1; // known from the device on the first keep
};

// Never destroyed: at exit the context's teardown frees what is kept, and a static destructor
// would run after the CUDA runtime's own.
FreedBuffers& freed_buffers() {
  static auto* freed = new FreedBuffers;
  return *freed;
}

void* allocate(std::int64_t size_bytes) {
  // A bad MC_DEVICE_BUFFER_REUSE throws here, from a constructor, before any buffer could be
  // released (a destructor must not throw).
  (void)device_buffer_reuse();
  if (void* p = freed_buffers().take(size_bytes)) return p;
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, static_cast<std::size_t>(size_bytes));
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError(); // not sticky: cleared, then tried again with nothing kept
    freed_buffers().free_all();
    err = cudaMalloc(&p, static_cast<std::size_t>(size_bytes));
  }
  if (err != cudaSuccess) cuda_failed(err, "cudaMalloc", __FILE__, __LINE__);
  return p;
}

void release(void* p, std::int64_t size_bytes) {
  if (p != nullptr && !freed_buffers().keep(p, size_bytes)) (void)cudaFree(p);
}

} // namespace

DeviceBuffer::DeviceBuffer(std::int64_t size_bytes) : size_bytes_(size_bytes) {
  if (size_bytes <= 0) return;
  data_ = allocate(size_bytes);
  MC_CUDA_CHECK(cudaMemset(data_, 0, static_cast<std::size_t>(size_bytes)));
}

DeviceBuffer::~DeviceBuffer() { release(data_, size_bytes_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_bytes_(std::exchange(other.size_bytes_, 0)) {
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release(data_, size_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

void upload_bytes(const DeviceBuffer& dst, const void* src, std::int64_t bytes) {
  MC_ASSERT(bytes <= dst.size_bytes());
  if (bytes > 0)
    MC_CUDA_CHECK(
        cudaMemcpy(dst.data(), src, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice));
}

void download_bytes(void* dst, const DeviceBuffer& src, std::int64_t bytes) {
  MC_ASSERT(bytes <= src.size_bytes());
  if (bytes > 0)
    MC_CUDA_CHECK(
        cudaMemcpy(dst, src.data(), static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost));
}

DeviceBuffer upload_arena(const model::Arena& arena) {
  DeviceBuffer buffer(arena.size_bytes());
  // The buffer starts zeroed: only non-zero chunks of pages ever touched go up, a run of them in
  // one copy, and an untouched page of a sparse arena is never read (model/touched_pages.h).
  const auto upload = [&](std::int64_t begin, std::int64_t end) {
    MC_CUDA_CHECK(cudaMemcpy(static_cast<std::byte*>(buffer.data()) + begin, arena.data() + begin,
                             static_cast<std::size_t>(end - begin), cudaMemcpyHostToDevice));
  };
  for (const model::ByteSpan& span : arena.touched()) {
    std::int64_t run_begin = -1;
    for (std::int64_t off = span.offset; off < span.end(); off += kChunkBytes) {
      const std::int64_t n = std::min(kChunkBytes, span.end() - off);
      const bool data = !all_zero(arena.data() + off, n);
      if (data && run_begin < 0) run_begin = off;
      if (!data && run_begin >= 0) {
        upload(run_begin, off);
        run_begin = -1;
      }
    }
    if (run_begin >= 0) upload(run_begin, span.end());
  }
  return buffer;
}

model::Arena download_arena(const DeviceBuffer& buffer) {
  model::Arena arena(buffer.size_bytes());
  if (buffer.size_bytes() == 0) return arena;
  // The device says which chunks hold data; only those come down, a run of them in one copy,
  // straight into the arena. A chunk the kernels zeroed stays a zero page of the fresh arena,
  // and a byte written anywhere, inside the blocks a case references or not, is in a flagged
  // chunk.
  const std::int64_t chunks = (buffer.size_bytes() + kChunkBytes - 1) / kChunkBytes;
  const DeviceBuffer flags(chunks);
  MC_CUDA_CHECK(static_cast<cudaError_t>(nonzero_chunks(buffer.data(), buffer.size_bytes(),
                                                        kChunkBytes, flags.as<std::uint8_t>())));
  const std::vector<std::uint8_t> nonzero =
      download_vector<std::uint8_t>(flags, static_cast<std::size_t>(chunks));
  const auto download = [&](std::int64_t first, std::int64_t last) { // chunks [first, last)
    const std::int64_t begin = first * kChunkBytes;
    const std::int64_t end = std::min(last * kChunkBytes, buffer.size_bytes());
    MC_CUDA_CHECK(cudaMemcpy(arena.data() + begin,
                             static_cast<const std::byte*>(buffer.data()) + begin,
                             static_cast<std::size_t>(end - begin), cudaMemcpyDeviceToHost));
  };
  std::int64_t run = -1;
  for (std::int64_t c = 0; c < chunks; ++c) {
    if (nonzero[static_cast<std::size_t>(c)] != 0 && run < 0) run = c;
    if (nonzero[static_cast<std::size_t>(c)] == 0 && run >= 0) {
      download(run, c);
      run = -1;
    }
  }
  if (run >= 0) download(run, chunks);
  return arena;
}

bool device_buffer_reuse() {
  static const bool reuse = [] { // read once per process
    const char* v = std::getenv("MC_DEVICE_BUFFER_REUSE");
    if (v == nullptr || std::string_view(v) == "on") return true;
    if (std::string_view(v) == "off") return false;
    throw model::InputError(
        fmt::format("MC_DEVICE_BUFFER_REUSE must be 'on' or 'off', got '{}'", v));
  }();
  return reuse;
}

void reset_device() {
  freed_buffers().free_all();
  MC_CUDA_CHECK(cudaDeviceReset());
}

bool device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

} // namespace mc::gpu
