#include "gpu/guarded_tables.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>

namespace mc::gpu {
namespace {

std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

// Whole pages for the table, then one inaccessible page.
struct Mapping {
  std::byte* base = nullptr;
  std::size_t data_bytes = 0; // the guard page starts at base + data_bytes
  std::size_t zero_below = 0; // every byte of [0, zero_below) is zero
};

Mapping map_guarded(std::size_t data_bytes) {
  const std::size_t page = page_bytes();
  void* p =
      mmap(nullptr, data_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<std::byte*>(p);
  if (mprotect(base + data_bytes, page, PROT_NONE) != 0) {
    munmap(base, data_bytes + page);
    throw std::bad_alloc();
  }
  return {.base = base, .data_bytes = data_bytes, .zero_below = data_bytes};
}

// One mapping per group index, grown when a table does not fit; unmapped when the thread ends.
class MappingPool {
public:
  MappingPool() = default;
  MappingPool(const MappingPool&) = delete;
  MappingPool& operator=(const MappingPool&) = delete;
  ~MappingPool() {
    for (const Mapping& m : mappings_)
      munmap(m.base, m.data_bytes + page_bytes());
  }

  // Group g's `bytes` placed to end at its guard page, every byte before them zero: a read
  // just before a table finds zeros (the null block), whatever an earlier launch left there.
  std::byte* place(std::size_t g, std::size_t bytes) {
    if (mappings_.size() <= g) mappings_.resize(g + 1);
    Mapping& m = mappings_[g];
    const std::size_t page = page_bytes();
    // At least one byte of zeros before the table: a whole page when it fills whole pages.
    const std::size_t data_bytes = (bytes / page + 1) * page;
    if (m.base == nullptr || m.data_bytes < data_bytes) {
      const Mapping grown = map_guarded(data_bytes);
      if (m.base != nullptr) munmap(m.base, m.data_bytes + page);
      m = grown;
    }
    const std::size_t start = m.data_bytes - bytes;
    if (m.zero_below < start) std::memset(m.base + m.zero_below, 0, start - m.zero_below);
    m.zero_below = start;
    return m.base + start;
  }

private:
  std::vector<Mapping> mappings_;
};

thread_local MappingPool t_pool;

} // namespace

GuardedTables::GuardedTables(const model::BlockTables& tables) {
  tables_.reserve(tables.groups.size());
  for (std::size_t g = 0; g < tables.groups.size(); ++g) {
    const std::vector<std::int32_t>& ids = tables.groups[g].block_ids;
    const std::size_t bytes = ids.size() * sizeof(std::int32_t);
    auto* table = reinterpret_cast<std::int32_t*>(t_pool.place(g, bytes));
    if (bytes > 0) std::memcpy(table, ids.data(), bytes);
    tables_.emplace_back(table, ids.size());
  }
}

} // namespace mc::gpu
