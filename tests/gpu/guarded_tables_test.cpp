// The host's copies of block tables: the same ids, ending at a page nothing may read, so that a
// read one element past a table faults on every run (tests/fuzz/isolate_mutant_test.cpp shows
// the fault and its line).
#include "gpu/guarded_tables.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace mc::gpu {
namespace {

model::BlockTables tables_of(std::vector<std::vector<std::int32_t>> rows_by_group,
                             std::int32_t row_stride) {
  model::BlockTables tables;
  for (const std::vector<std::int32_t>& ids : rows_by_group) {
    const auto rows = static_cast<std::int32_t>(ids.size()) / row_stride;
    model::BlockTable t = model::BlockTable::make(rows, row_stride, row_stride);
    t.block_ids = ids;
    tables.groups.push_back(t);
  }
  return tables;
}

std::uint64_t end_address(const GuardedTables& g, std::size_t group) {
  return g.address(group) + g.group(group).size_bytes();
}

TEST(GuardedTables, HoldTheIdsAndEndAtAPageBoundary) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const model::BlockTables tables = tables_of({{1, 2, 3, 4, 5, 6}, {7, 8, -1, 0}}, 2);
  const GuardedTables g(tables);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(std::vector<std::int32_t>(g.group(0).begin(), g.group(0).end()),
            (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(std::vector<std::int32_t>(g.group(1).begin(), g.group(1).end()),
            (std::vector<std::int32_t>{7, 8, -1, 0}));
  EXPECT_EQ(end_address(g, 0) % page, 0u);
  EXPECT_EQ(end_address(g, 1) % page, 0u);
  EXPECT_NE(g.address(0), reinterpret_cast<std::uint64_t>(tables.groups[0].block_ids.data()));
}

TEST(GuardedTables, ALargerTableOfTheNextLaunchFitsToo) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  { const GuardedTables small(tables_of({{1, 2}}, 2)); }
  std::vector<std::int32_t> ids(static_cast<std::size_t>(3 * page / sizeof(std::int32_t)));
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>(i);
  const GuardedTables large(tables_of({ids}, 4));
  EXPECT_EQ(std::vector<std::int32_t>(large.group(0).begin(), large.group(0).end()), ids);
  EXPECT_EQ(end_address(large, 0) % page, 0u);
}

// A smaller table after a larger one (the mapping is reused): what lies before it is zeros,
// not the larger table's ids, so a read before a table finds the same on every run.
TEST(GuardedTables, BeforeATableAreZerosWhateverCameBefore) {
  std::vector<std::int32_t> ids(1024, 7);
  { const GuardedTables large(tables_of({ids}, 4)); }
  const GuardedTables small(tables_of({{1, 2}}, 2));
  const std::int32_t* table = small.group(0).data();
  EXPECT_EQ(table[0], 1);
  for (std::ptrdiff_t i = 1; i <= 16; ++i)
    EXPECT_EQ(table[-i], 0) << i << " before";
}

// The permissions of the mapping holding `address`, from /proc/self/maps ("rw-p", "---p"), or ""
// (read there rather than by touching the page: a fault under a sanitizer is its report).
std::string permissions_at(std::uint64_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s", &begin, &end, perms) != 3)
      continue;
    if (begin <= address && address < end) return perms;
  }
  return "";
}

TEST(GuardedTables, TheByteAfterATableCannotBeReadAndTheTableCan) {
  const GuardedTables g(tables_of({{1, 2, 3, 4}}, 2));
  EXPECT_EQ(permissions_at(g.address(0)), "rw-p");
  EXPECT_EQ(permissions_at(end_address(g, 0)), "---p");
}

} // namespace
} // namespace mc::gpu
