#include "model/address_ranges.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

namespace mc::model {
namespace {

struct Range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0; // one past the last byte
  char name[kRangeNameBytesMax] = {};
};

// Trivially constructible, so the thread_local needs no initialisation call and a signal
// handler reading it touches only static TLS (initial-exec: no lazy allocation either).
struct Registry {
  int count = 0;   // ranges[0, count) are valid
  int dropped = 0; // adds past kAddressRangesMax, still inside some scope
  Range ranges[kAddressRangesMax];
};

[[gnu::tls_model("initial-exec")]] thread_local Registry registry;

} // namespace

AddressRangeScope::AddressRangeScope() : mark_(registry.count + registry.dropped) {}

AddressRangeScope::~AddressRangeScope() {
  // Drop what this scope added: first the adds that did not fit, then the ranges.
  const int added = registry.count + registry.dropped - mark_;
  MC_ASSERT(added >= 0);
  const int dropped_here = added < registry.dropped ? added : registry.dropped;
  registry.dropped -= dropped_here;
  registry.count -= added - dropped_here;
  MC_ASSERT(registry.count >= 0);
}

void AddressRangeScope::add(const void* begin, std::size_t bytes, std::string_view name) {
  if (bytes == 0) return;
  if (registry.count == kAddressRangesMax) {
    ++registry.dropped;
    return;
  }
  Range& r = registry.ranges[registry.count];
  r.begin = reinterpret_cast<std::uint64_t>(begin);
  r.end = r.begin + bytes;
  const std::size_t n = name.size() < kRangeNameBytesMax ? name.size() : kRangeNameBytesMax - 1;
  std::memcpy(r.name, name.data(), n);
  r.name[n] = '\0';
  // The entry is whole before the count shows it to a handler interrupting this thread.
  std::atomic_signal_fence(std::memory_order_release);
  ++registry.count;
}

RangeLocation locate_address(std::uint64_t address) noexcept {
  RangeLocation best;
  std::uint64_t best_distance = kRangeNearBytesMax + 1;
  const int count = registry.count;
  std::atomic_signal_fence(std::memory_order_acquire);
  for (int i = count - 1; i >= 0; --i) {
    const Range& r = registry.ranges[i];
    RangeRelation relation = RangeRelation::inside;
    std::uint64_t offset = address - r.begin;
    std::uint64_t distance = 0;
    if (address < r.begin) {
      relation = RangeRelation::before_start;
      offset = r.begin - address;
      distance = offset;
    } else if (address >= r.end) {
      relation = RangeRelation::past_end;
      offset = address - r.end;
      distance = offset + 1;
    }
    if (distance >= best_distance) continue;
    best_distance = distance;
    best.relation = relation;
    best.offset_bytes = offset;
    std::memcpy(best.name, r.name, kRangeNameBytesMax);
    if (distance == 0) break; // inside: the latest registered range holding it
  }
  return best;
}

std::string describe(const RangeLocation& location) {
  const std::string_view name(location.name, strnlen(location.name, kRangeNameBytesMax));
  switch (location.relation) {
  case RangeRelation::none:
    return "in no buffer of the case";
  case RangeRelation::inside:
    return fmt::format("in {} at byte {}", name, location.offset_bytes);
  case RangeRelation::past_end:
    return fmt::format("{} bytes past the end of {}", location.offset_bytes, name);
  case RangeRelation::before_start:
    return fmt::format("{} bytes before the start of {}", location.offset_bytes, name);
  }
  return "in no buffer of the case";
}

int address_ranges_registered() {
  return registry.count;
}

} // namespace mc::model
