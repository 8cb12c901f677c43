// Arenas: host byte buffers holding every block of the state tensors of a layout.
//
// Storage is an anonymous private mapping, so an arena of many GiB costs memory
// only where it is touched: the >2^32-byte offset tests (class B) use one that
// is mostly never written. poison() fills bytes with a position-dependent
// pattern of prime period, so a byte nothing wrote shows, and a copy of poison
// onto poison at a different offset shows too.
#pragma once

#include "model/touched_pages.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mc::model {

inline constexpr std::int64_t kPoisonPeriod = 4099; // prime: no block stride is a multiple in practice

// The poison byte at arena offset `offset_bytes`.
std::uint8_t poison_byte(std::int64_t offset_bytes);
// The poison pattern itself, kPoisonPeriod bytes: byte i is the poison of every offset
// congruent to i (what a device that makes poison is given).
const std::uint8_t* poison_pattern_bytes();
// The poison of arena bytes [offset_bytes, offset_bytes + out.size()), into `out`.
void fill_poison(std::span<std::byte> out, std::int64_t offset_bytes);

// A byte range of one arena of a layout (model/layout.h).
struct ArenaRange {
  std::int32_t arena = 0;
  std::int64_t offset_bytes = 0;
  std::int64_t size_bytes = 0;
};

class Arena {
public:
  Arena() = default;
  explicit Arena(std::int64_t size_bytes); // zero-filled, lazily mapped
  // Bytes [offset, offset + size) of the shared memory file `fd` (offset a multiple of the
  // page size), mapped shared: another process that maps the same file sees every write. Such
  // an arena counts every page as touched (another process's writes never show in this one's
  // page map). Throws EnvironmentError when the mapping fails.
  static Arena map_shared(int fd, std::int64_t offset, std::int64_t size_bytes);
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Arena clone() const;

  std::int64_t size_bytes() const { return size_bytes_; }
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::span<std::byte> bytes() { return {data_, static_cast<std::size_t>(size_bytes_)}; }
  std::span<const std::byte> bytes() const {
    return {data_, static_cast<std::size_t>(size_bytes_)};
  }
  std::uint64_t address() const { return reinterpret_cast<std::uint64_t>(data_); }

  // Runs of pages ever touched (model/touched_pages.h): every other byte is zero. Copying,
  // comparing and exporting visit only these, so an untouched page is never read.
  std::vector<ByteSpan> touched() const;

  void poison(); // the whole arena
  void poison_range(std::int64_t offset_bytes, std::int64_t size_bytes);

  // Byte-exact equality; the first differing offset or -1.
  std::int64_t first_difference(const Arena& other) const;

private:
  std::byte* data_ = nullptr;
  std::int64_t size_bytes_ = 0;
  bool shared_ = false; // map_shared: touched() is the whole range
};

} // namespace mc::model
