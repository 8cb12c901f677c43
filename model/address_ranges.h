// Named address ranges of the buffers a thread is running a case on (arenas, block tables,
// per-request arrays), so that a crash report can say which buffer a faulting address is in
// or next to: "12 bytes past the end of block table of group 1".
//
// The registry is per thread (a SIGSEGV is delivered to the thread that faulted) and of fixed
// size (registering never allocates), and locate_address reads it without locks or
// allocation: it is async-signal-safe, for the crash handler of fuzz/isolate.h. It lives in
// model/ because the host backend (gpu/, which may not include fuzz/) fills it for every launch;
// that costs a few dozen bytes copied per buffer, whether or not a handler listens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mc::model {

inline constexpr int kAddressRangesMax = 64;          // per thread; more are not named
inline constexpr std::size_t kRangeNameBytesMax = 64; // of a name, with its terminating zero
// How far outside a range an address is still "next to" it. Buffers sit close together (a
// heap holds the small ones side by side), so the nearer of two is a good guess only for a near
// miss; a wild address megabytes away is named as in no buffer rather than pinned on a
// neighbour it has nothing to do with.
inline constexpr std::uint64_t kRangeNearBytesMax = std::uint64_t{1} << 20;

enum class RangeRelation : std::uint8_t {
  none,         // no registered range holds the address or lies within kRangeNearBytesMax
  inside,       // offset_bytes from the range's start
  past_end,     // offset_bytes past the range's last byte + 1 (0: the first byte after it)
  before_start, // offset_bytes before its first byte (1: the byte just before it)
};

// Where an address lies against the registered ranges. A plain struct: the crash handler
// sends it through a pipe as bytes.
struct RangeLocation {
  RangeRelation relation = RangeRelation::none;
  std::uint64_t offset_bytes = 0;
  char name[kRangeNameBytesMax] = {}; // the range's name, zero-terminated
};

// Registers ranges on this thread while alive; its destructor drops the ranges registered
// since it was made, so scopes nest like the calls that make them.
class AddressRangeScope {
public:
  AddressRangeScope();
  ~AddressRangeScope();
  AddressRangeScope(const AddressRangeScope&) = delete;
  AddressRangeScope& operator=(const AddressRangeScope&) = delete;

  // Adds [begin, begin + bytes), named `name` (cut to kRangeNameBytesMax - 1 bytes). An empty
  // range is not added; past kAddressRangesMax ranges it is dropped (a crash line then names
  // fewer buffers, nothing else changes).
  void add(const void* begin, std::size_t bytes, std::string_view name);

private:
  int mark_ = 0; // ranges registered before this scope
};

// The registered range holding `address` (the latest registered, where ranges overlap), else
// the nearest one within kRangeNearBytesMax. Async-signal-safe.
RangeLocation locate_address(std::uint64_t address) noexcept;

// The location in words: "in X at byte 40", "12 bytes past the end of X", "3 bytes before the
// start of X", "in no buffer of the case".
std::string describe(const RangeLocation& location);

// Ranges registered on this thread now.
int address_ranges_registered();

} // namespace mc::model
