#include "model/arena.h"

#include "model/errors.h"

#include <sys/mman.h>

#include <array>
#include <cstring>
#include <new>

namespace mc::model {
namespace {

const std::array<std::uint8_t, kPoisonPeriod>& poison_pattern() {
  static const std::array<std::uint8_t, kPoisonPeriod> pattern = [] {
    std::array<std::uint8_t, kPoisonPeriod> p{};
    std::uint32_t x = 0x9E3779B9u;
    for (auto& byte : p) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      byte = static_cast<std::uint8_t>(x >> 24);
    }
    return p;
  }();
  return pattern;
}

std::byte* map_bytes(std::int64_t size_bytes) {
  if (size_bytes == 0) return nullptr;
  void* p = mmap(nullptr, static_cast<std::size_t>(size_bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<std::byte*>(p);
}

} // namespace

std::uint8_t poison_byte(std::int64_t offset_bytes) {
  MC_ASSERT(offset_bytes >= 0);
  return poison_pattern()[static_cast<std::size_t>(offset_bytes % kPoisonPeriod)];
}

Arena::Arena(std::int64_t size_bytes) : data_(map_bytes(size_bytes)), size_bytes_(size_bytes) {
  MC_ASSERT(size_bytes >= 0);
}

Arena::~Arena() {
  if (data_ != nullptr) munmap(data_, static_cast<std::size_t>(size_bytes_));
}

Arena::Arena(Arena&& other) noexcept : data_(other.data_), size_bytes_(other.size_bytes_) {
  other.data_ = nullptr;
  other.size_bytes_ = 0;
}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, static_cast<std::size_t>(size_bytes_));
    data_ = other.data_;
    size_bytes_ = other.size_bytes_;
    other.data_ = nullptr;
    other.size_bytes_ = 0;
  }
  return *this;
}

Arena Arena::clone() const {
  Arena copy(size_bytes_);
  // Copy page by page, skipping all-zero pages so a sparse arena stays sparse.
  constexpr std::int64_t kPage = 1 << 16;
  static const std::array<std::byte, kPage> zeros{};
  for (std::int64_t off = 0; off < size_bytes_; off += kPage) {
    const std::int64_t n = std::min(kPage, size_bytes_ - off);
    if (std::memcmp(data_ + off, zeros.data(), static_cast<std::size_t>(n)) != 0)
      std::memcpy(copy.data_ + off, data_ + off, static_cast<std::size_t>(n));
  }
  return copy;
}

void Arena::poison() {
  // Every page is about to be written: ask for huge pages, so a multi-GiB arena costs a few
  // thousand page faults instead of a million (a hint; without THP nothing changes). A sparse
  // arena, never poisoned, keeps its small pages.
  if (data_ != nullptr) (void)madvise(data_, static_cast<std::size_t>(size_bytes_), MADV_HUGEPAGE);
  poison_range(0, size_bytes_);
}

void Arena::poison_range(std::int64_t offset_bytes, std::int64_t size_bytes) {
  MC_ASSERT(offset_bytes >= 0 && size_bytes >= 0 && offset_bytes + size_bytes <= size_bytes_);
  const auto& pattern = poison_pattern();
  std::int64_t off = offset_bytes;
  const std::int64_t end = offset_bytes + size_bytes;
  while (off < end) {
    const std::int64_t phase = off % kPoisonPeriod;
    const std::int64_t n = std::min(end - off, kPoisonPeriod - phase);
    std::memcpy(data_ + off, pattern.data() + phase, static_cast<std::size_t>(n));
    off += n;
  }
}

std::int64_t Arena::first_difference(const Arena& other) const {
  if (size_bytes_ != other.size_bytes_) return std::min(size_bytes_, other.size_bytes_);
  constexpr std::int64_t kChunk = 1 << 16;
  for (std::int64_t off = 0; off < size_bytes_; off += kChunk) {
    const std::int64_t n = std::min(kChunk, size_bytes_ - off);
    if (std::memcmp(data_ + off, other.data_ + off, static_cast<std::size_t>(n)) == 0) continue;
    for (std::int64_t i = off; i < off + n; ++i)
      if (data_[i] != other.data_[i]) return i;
  }
  return -1;
}

} // namespace mc::model
