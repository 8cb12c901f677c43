#include "model/arena.h"

#include "model/errors.h"
#include "model/parallel.h"
#include "model/touched_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

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

constexpr std::int64_t kChunk = 1 << 16;

const std::array<std::byte, kChunk>& zero_chunk() {
  static const std::array<std::byte, kChunk> zeros{};
  return zeros;
}

// The first index where a[0, n) and b[0, n) differ, or -1; a null b reads as zeros.
std::int64_t first_mismatch(const std::byte* a, const std::byte* b, std::int64_t n) {
  for (std::int64_t off = 0; off < n; off += kChunk) {
    const std::int64_t m = std::min(kChunk, n - off);
    const std::byte* other = b != nullptr ? b + off : zero_chunk().data();
    if (std::memcmp(a + off, other, static_cast<std::size_t>(m)) == 0) continue;
    for (std::int64_t i = 0; i < m; ++i)
      if (a[off + i] != other[i]) return off + i;
  }
  return -1;
}

// Whether `at` lies in one of `spans` (in order); `cursor` only moves forward, so a walk over
// increasing positions costs one pass.
bool in_spans(const std::vector<ByteSpan>& spans, std::size_t& cursor, std::int64_t at) {
  while (cursor < spans.size() && spans[cursor].end() <= at) ++cursor;
  return cursor < spans.size() && spans[cursor].offset <= at;
}

} // namespace

const std::uint8_t* poison_pattern_bytes() {
  return poison_pattern().data();
}

void fill_poison(std::span<std::byte> out, std::int64_t offset_bytes) {
  MC_ASSERT(offset_bytes >= 0);
  const auto& pattern = poison_pattern();
  std::size_t done = 0;
  while (done < out.size()) {
    const auto phase =
        static_cast<std::size_t>((offset_bytes + static_cast<std::int64_t>(done)) % kPoisonPeriod);
    const std::size_t n = std::min(out.size() - done, pattern.size() - phase);
    std::memcpy(out.data() + done, pattern.data() + phase, n);
    done += n;
  }
}

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

Arena Arena::map_shared(int fd, std::int64_t offset, std::int64_t size_bytes) {
  MC_ASSERT(fd >= 0 && offset >= 0 && size_bytes >= 0);
  Arena arena;
  arena.size_bytes_ = size_bytes;
  arena.shared_ = true;
  if (size_bytes == 0) return arena;
  void* p = mmap(nullptr, static_cast<std::size_t>(size_bytes), PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED)
    throw EnvironmentError(
        fmt::format("cannot map {} bytes of shared memory: {}", size_bytes, std::strerror(errno)));
  arena.data_ = static_cast<std::byte*>(p);
  return arena;
}

Arena::Arena(Arena&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_bytes_(std::exchange(other.size_bytes_, 0)),
      shared_(std::exchange(other.shared_, false)) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, static_cast<std::size_t>(size_bytes_));
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    shared_ = std::exchange(other.shared_, false);
  }
  return *this;
}

Arena Arena::clone() const {
  Arena copy(size_bytes_);
  // Only pages ever touched can hold anything but zeros; of those, all-zero chunks are skipped
  // too, so a sparse arena stays sparse.
  for (const ByteSpan& span : touched()) {
    for (std::int64_t off = span.offset; off < span.end(); off += kChunk) {
      const std::int64_t n = std::min(kChunk, span.end() - off);
      if (std::memcmp(data_ + off, zero_chunk().data(), static_cast<std::size_t>(n)) != 0)
        std::memcpy(copy.data_ + off, data_ + off, static_cast<std::size_t>(n));
    }
  }
  return copy;
}

std::vector<ByteSpan> Arena::touched() const {
  if (shared_) return size_bytes_ > 0 ? std::vector<ByteSpan>{{0, size_bytes_}} : std::vector<ByteSpan>{};
  return touched_spans(data_, size_bytes_);
}

void Arena::poison() {
  // Every page is about to be written: ask for huge pages, so a multi-GiB arena costs a few
  // thousand page faults instead of a million (a hint; without THP nothing changes). A sparse
  // arena, never poisoned, keeps its small pages.
  if (data_ != nullptr) (void)madvise(data_, static_cast<std::size_t>(size_bytes_), MADV_HUGEPAGE);
  // Spread over the cores in 2 MiB pieces: the first touch of a multi-GiB arena is most of a
  // full-depth run's start.
  constexpr std::int64_t kPiece = std::int64_t{2} << 20;
  run_parts(size_bytes_, [&](std::int64_t part, std::int64_t parts) {
    for (std::int64_t at = part * kPiece; at < size_bytes_; at += parts * kPiece)
      poison_range(at, std::min(kPiece, size_bytes_ - at));
  });
}

void Arena::poison_range(std::int64_t offset_bytes, std::int64_t size_bytes) {
  MC_ASSERT(offset_bytes >= 0 && size_bytes >= 0 && offset_bytes + size_bytes <= size_bytes_);
  fill_poison({data_ + offset_bytes, static_cast<std::size_t>(size_bytes)}, offset_bytes);
}

std::int64_t Arena::first_difference(const Arena& other) const {
  if (size_bytes_ != other.size_bytes_) return std::min(size_bytes_, other.size_bytes_);
  const std::vector<ByteSpan> mine = touched();
  const std::vector<ByteSpan> theirs = other.touched();
  // Between two consecutive span boundaries each arena is touched throughout or not at all; a
  // side never touched reads as zeros without reading its pages.
  std::vector<std::int64_t> cuts{0, size_bytes_};
  for (const std::vector<ByteSpan>* spans : {&mine, &theirs})
    for (const ByteSpan& span : *spans) {
      cuts.push_back(span.offset);
      cuts.push_back(span.end());
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::size_t my_cursor = 0, their_cursor = 0;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const std::int64_t lo = cuts[i], n = cuts[i + 1] - lo;
    const bool a = in_spans(mine, my_cursor, lo), b = in_spans(theirs, their_cursor, lo);
    std::int64_t at = -1;
    if (a && b)
      at = first_mismatch(data_ + lo, other.data_ + lo, n);
    else if (a)
      at = first_mismatch(data_ + lo, nullptr, n);
    else if (b)
      at = first_mismatch(other.data_ + lo, nullptr, n);
    if (at >= 0) return lo + at;
  }
  return -1;
}

} // namespace mc::model
