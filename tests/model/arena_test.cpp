#include "model/arena.h"

#include <cstring>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mc::model {
namespace {

TEST(Arena, PoisonIsPositionDependentAndDetectable) {
  Arena a(10000);
  a.poison();
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[123]), poison_byte(123));
  EXPECT_EQ(poison_byte(5), poison_byte(5 + kPoisonPeriod));
  int same = 0;
  for (int i = 1; i < 64; ++i)
    same += poison_byte(i) == poison_byte(i - 1);
  EXPECT_LT(same, 8); // not a constant fill
  Arena b = a.clone();
  EXPECT_EQ(a.first_difference(b), -1);
  b.data()[7777] = static_cast<std::byte>(~static_cast<std::uint8_t>(b.data()[7777]));
  EXPECT_EQ(a.first_difference(b), 7777);
}

TEST(Arena, SparseArenaPastFourGiB) {
  const std::int64_t size = (std::int64_t{5} << 30) + 4096; // 5 GiB, mapped lazily
  Arena a(size);
  const std::int64_t offset = (std::int64_t{1} << 32) + 12345;
  a.poison_range(offset, 100);
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[offset + 7]), poison_byte(offset + 7));
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[offset - 1]), 0);
  a.data()[size - 1] = std::byte{42};
  EXPECT_EQ(static_cast<std::uint8_t>(a.data()[size - 1]), 42);
}

std::int64_t page_bytes() { return ::sysconf(_SC_PAGESIZE); }

// Exactly the pages written are touched, in page-aligned runs clipped to the arena; an arena
// nothing wrote has none.
TEST(TouchedPages, ExactlyThePagesWritten) {
  if (!page_map_available()) GTEST_SKIP() << "/proc/self/pagemap does not answer here";
  const std::int64_t page = page_bytes();
  const std::int64_t size = 64 * page + 100; // ends inside a page
  Arena a(size);
  // Small pages, so that one written byte touches one page whatever the host's THP policy.
  ASSERT_EQ(::madvise(a.data(), static_cast<std::size_t>(size), MADV_NOHUGEPAGE), 0);
  EXPECT_TRUE(a.touched().empty());
  a.data()[5] = std::byte{1};
  a.data()[10 * page + 7] = std::byte{1};
  a.data()[11 * page] = std::byte{1}; // adjacent: one run of two pages
  a.data()[size - 1] = std::byte{1};
  const std::vector<ByteSpan> spans = a.touched();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].offset, 0);
  EXPECT_EQ(spans[0].size, page);
  EXPECT_EQ(spans[1].offset, 10 * page);
  EXPECT_EQ(spans[1].size, 2 * page);
  EXPECT_EQ(spans[2].offset, 64 * page);
  EXPECT_EQ(spans[2].size, 100);
}

// Cloning and comparing read the touched pages of either arena and nothing else: the byte
// that differs is found on whichever side holds it, and no untouched page becomes touched.
TEST(TouchedPages, CloneAndCompareTouchNothingNew) {
  if (!page_map_available()) GTEST_SKIP() << "/proc/self/pagemap does not answer here";
  const std::int64_t page = page_bytes();
  const std::int64_t size = std::int64_t{1} << 30;
  Arena a(size);
  Arena b(size);
  for (Arena* x : {&a, &b}) // THP "always" for these two mappings: the host policy at its worst
    (void)::madvise(x->data(), static_cast<std::size_t>(size), MADV_HUGEPAGE);
  a.poison_range(300 * page, 3 * page);
  const std::vector<ByteSpan> a_before = a.touched();
  Arena c = a.clone();
  EXPECT_EQ(a.first_difference(c), -1);
  EXPECT_EQ(c.first_difference(a), -1);
  EXPECT_EQ(a.first_difference(b), 300 * page); // b never touched: read as zeros
  EXPECT_EQ(b.first_difference(a), 300 * page);
  EXPECT_TRUE(b.touched().empty()) << "comparing read an untouched arena";
  const std::vector<ByteSpan> a_after = a.touched();
  ASSERT_EQ(a_after.size(), a_before.size());
  for (std::size_t i = 0; i < a_after.size(); ++i) {
    EXPECT_EQ(a_after[i].offset, a_before[i].offset);
    EXPECT_EQ(a_after[i].size, a_before[i].size);
  }
  std::int64_t c_touched = 0;
  for (const ByteSpan& s : c.touched()) c_touched += s.size;
  EXPECT_LE(c_touched, std::int64_t{4} << 20) << "the clone is not sparse";
  // A byte set far from everything in b only.
  b.data()[size - 3] = std::byte{9};
  EXPECT_EQ(c.first_difference(b), 300 * page);
  std::memset(c.data() + 300 * page, 0, static_cast<std::size_t>(3 * page));
  EXPECT_EQ(c.first_difference(b), size - 3);
}

// A forked child (every isolated case runs in one) answers for its own pages, not its
// parent's: a page the child writes is touched there, and one only the parent wrote is not.
TEST(TouchedPages, AForkedChildSeesItsOwnPages) {
  if (!page_map_available()) GTEST_SKIP() << "/proc/self/pagemap does not answer here";
  const std::int64_t page = page_bytes();
  Arena child_only(16 * page);
  Arena parent_only(16 * page);
  for (Arena* x : {&child_only, &parent_only})
    ASSERT_EQ(::madvise(x->data(), static_cast<std::size_t>(16 * page), MADV_NOHUGEPAGE), 0);
  ASSERT_TRUE(child_only.touched().empty()); // the parent has asked before it forks
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    child_only.data()[5 * page] = std::byte{1};
    const std::vector<ByteSpan> spans = child_only.touched();
    const bool ok = spans.size() == 1 && spans[0].offset == 5 * page && spans[0].size == page;
    ::_exit(ok ? 0 : 1);
  }
  parent_only.data()[3 * page] = std::byte{1};
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read another process's page table";
  EXPECT_TRUE(child_only.touched().empty());
  EXPECT_EQ(parent_only.touched().size(), 1u);
}

// The kernel's PAGEMAP_SCAN and the page-by-page entries give the same runs: scattered single
// pages, neighbours, a huge-page region, a read-only (zero page) touch and the arena's ragged
// end, in an arena of 64 MiB that is mostly holes.
TEST(TouchedPages, ScanAndEntriesAgree) {
  if (!page_map_available()) GTEST_SKIP() << "/proc/self/pagemap does not answer here";
  const std::int64_t page = page_bytes();
  const std::int64_t size = (std::int64_t{64} << 20) + 77;
  Arena a(size);
  std::optional<std::vector<ByteSpan>> none = scanned_spans(a.data(), size);
  if (!none) GTEST_SKIP() << "this kernel has no PAGEMAP_SCAN (Linux 6.7 and later)";
  EXPECT_TRUE(none->empty());
  ASSERT_EQ(::madvise(a.data(), std::size_t{32} << 20, MADV_NOHUGEPAGE), 0);
  (void)::madvise(a.data() + (std::int64_t{32} << 20), std::size_t{32} << 20, MADV_HUGEPAGE);
  for (const std::int64_t p : {0, 1, 2, 9, 100, 4095, 4096, 7000})
    a.data()[p * page + 3] = std::byte{1};
  volatile const std::byte* read_only = a.data() + 5000 * page;
  (void)*read_only; // a read: the zero page, touched as far as either asker is concerned
  a.poison_range(std::int64_t{40} << 20, 3 * page);
  a.data()[size - 1] = std::byte{2};
  const std::vector<ByteSpan> scanned = *scanned_spans(a.data(), size);
  const std::vector<ByteSpan> entries = entry_spans(a.data(), size);
  ASSERT_EQ(scanned.size(), entries.size());
  for (std::size_t i = 0; i < scanned.size(); ++i) {
    EXPECT_EQ(scanned[i].offset, entries[i].offset) << "run " << i;
    EXPECT_EQ(scanned[i].size, entries[i].size) << "run " << i;
  }
  // Pages 0-2 are one run; 4095 and 4096 another; the arena's last bytes end the last run.
  ASSERT_GE(scanned.size(), 6u);
  EXPECT_EQ(scanned[0].offset, 0);
  EXPECT_EQ(scanned[0].size, 3 * page);
  EXPECT_EQ(scanned.back().end(), size);
  // Offsets inside the arena only, even where a run starts before it.
  const std::optional<std::vector<ByteSpan>> inner = scanned_spans(a.data() + 3, 2 * page);
  ASSERT_TRUE(inner.has_value());
  ASSERT_EQ(inner->size(), 1u);
  EXPECT_EQ((*inner)[0].offset, 0);
  EXPECT_EQ((*inner)[0].size, 2 * page);
}

} // namespace
} // namespace mc::model
