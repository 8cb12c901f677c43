// Block tables as the host runs kernels over them: each group's table copied so that it ends
// flush against a page nothing may read or write.
//
// A kernel that reads a row past the end of a table (a row index taken from the wrong array,
// as the out-of-bounds mutants do) then faults on that very read, on every run. Read from the
// case's own std::vector instead, the bytes past the table were whatever the heap held there:
// other buffers and this process's addresses, which change from run to run with address space
// randomisation, so whether and where the kernel then went wrong changed too, and so did the
// counterexample a campaign shrank to. The fault names the table (model/address_ranges.h, the
// crash line of fuzz/isolate.h). Reads just before a table's start find zeros, the null block
// (at least the rest of its first page); they are not guarded.
//
// The mappings are kept per thread and reused by the next launch whose tables fit: mapping,
// protecting and unmapping for every launch cost about 19 us a launch of two groups (a 2-core
// machine under load), several seconds of a 2000-case engine campaign.
#pragma once

#include "model/block_table.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mc::gpu {

// The copies of one launch's tables, valid until the next GuardedTables of this thread is
// made (one launch at a time per thread: the host backend runs launches one after another).
class GuardedTables {
public:
  explicit GuardedTables(const model::BlockTables& tables); // throws std::bad_alloc
  GuardedTables(const GuardedTables&) = delete;
  GuardedTables& operator=(const GuardedTables&) = delete;

  std::size_t size() const { return tables_.size(); }
  // Group g's table: its block ids, row-major with the case's row stride.
  std::span<const std::int32_t> group(std::size_t g) const { return tables_[g]; }
  std::uint64_t address(std::size_t g) const {
    return reinterpret_cast<std::uint64_t>(tables_[g].data());
  }

private:
  std::vector<std::span<const std::int32_t>> tables_; // each ends where its guard page starts
};

} // namespace mc::gpu
