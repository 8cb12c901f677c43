// Work spread over threads (model/parallel.h): how many parts run and where, a part's exception
// coming back, and the two pieces of work in model/ that use it (an arena's poison, a
// comparison against expected bytes) giving the same bytes and answers on any number of threads.
#include "model/arena.h"
#include "model/expected_bytes.h"
#include "model/parallel.h"
#include "model/stamps.h"
#include "tests/model/work_threads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mc::model {
namespace {

using Threads = test::WorkThreads;

struct Seen {
  std::mutex mutex;
  std::vector<std::pair<std::int64_t, std::int64_t>> parts; // (part, parts)
  std::set<std::thread::id> threads;
  void add(std::int64_t part, std::int64_t parts_) {
    const std::lock_guard lock(mutex);
    parts.emplace_back(part, parts_);
    threads.insert(std::this_thread::get_id());
  }
};

TEST(RunParts, WorkBelowTheThresholdRunsOnTheCallingThreadAlone) {
  const Threads t(4, 100);
  Seen seen;
  run_parts(99, [&](std::int64_t part, std::int64_t parts) { seen.add(part, parts); });
  EXPECT_EQ(seen.parts, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1}}));
  EXPECT_EQ(seen.threads, std::set{std::this_thread::get_id()});
}

TEST(RunParts, LargeWorkRunsEveryPartOnceOnThreadsOfItsOwn) {
  const Threads t(4, 100);
  Seen seen;
  std::thread::id part0;
  run_parts(100, [&](std::int64_t part, std::int64_t parts) {
    seen.add(part, parts);
    if (part == 0) part0 = std::this_thread::get_id();
  });
  std::sort(seen.parts.begin(), seen.parts.end());
  EXPECT_EQ(seen.parts,
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 4}, {1, 4}, {2, 4}, {3, 4}}));
  EXPECT_EQ(seen.threads.size(), 4u);
  EXPECT_EQ(part0, std::this_thread::get_id());
}

TEST(RunParts, OneThreadRunsOnePartWhateverTheWork) {
  const Threads t(1, 0);
  Seen seen;
  run_parts(std::int64_t{1} << 40,
            [&](std::int64_t part, std::int64_t parts) { seen.add(part, parts); });
  EXPECT_EQ(seen.parts, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1}}));
}

TEST(RunParts, TheLowestFailingPartsExceptionComesBackAfterEveryPartRan) {
  const Threads t(4, 0);
  Seen seen;
  try {
    run_parts(1, [&](std::int64_t part, std::int64_t parts) {
      seen.add(part, parts);
      if (part == 3 || part == 1) throw std::runtime_error("part " + std::to_string(part));
    });
    FAIL() << "no exception came back";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "part 1");
  }
  EXPECT_EQ(seen.parts.size(), 4u);
}

TEST(ParallelWork, AnArenasPoisonIsTheSameOnAnyNumberOfThreads) {
  const Threads t(3, 0);
  const std::int64_t size = (std::int64_t{5} << 20) + 123; // pieces of 2 MiB and a short tail
  Arena arena(size);
  arena.poison();
  const std::span<const std::byte> bytes = arena.bytes();
  for (std::int64_t k = 0; k < size; ++k)
    ASSERT_EQ(static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(k)]), poison_byte(k))
        << "byte " << k;
}

TEST(ParallelWork, FirstDifferencesAreTheSameOnAnyNumberOfThreads) {
  // 40 ranges over one buffer: temporal states, poison and SD and DS conv states (elements of
  // 2, 4 and 8 bytes, some with a row of poison), each made as described, then a byte flipped
  // in every other one.
  ExpectedStates expected;
  std::int64_t offset = 0;
  for (std::int32_t i = 0; i < 40; ++i) {
    ExpectedRange r{.range = {.arena = 0, .offset_bytes = offset, .size_bytes = 0},
                    .kind = static_cast<ExpectedKind>(i % 3),
                    .seed = mix64(static_cast<std::uint64_t>(i))};
    if (r.kind == ExpectedKind::conv) {
      r = {.range = r.range,
           .kind = ExpectedKind::conv,
           .first_row = static_cast<std::int32_t>(expected.rows.size()),
           .state_len = 3,
           .elem_size = std::array{2, 4, 8}[static_cast<std::size_t>(i % 9 / 3)],
           .ds = i % 2 == 0,
           .conv_dim = 17};
      if (i % 4 == 2)
        expected.rows.push_back({.kind = ConvRowMeaning::Kind::poison,
                                 .poison_row = 1,
                                 .value = static_cast<std::uint64_t>(offset)});
      else
        expected.rows.push_back({.kind = ConvRowMeaning::Kind::empty});
      expected.rows.push_back({.kind = ConvRowMeaning::Kind::stamp, .value = mix64(7 + i)});
      expected.rows.push_back({.kind = ConvRowMeaning::Kind::stamp, .value = mix64(9 + i)});
      r.range.size_bytes = 3 * 17 * r.elem_size;
    } else {
      r.range.size_bytes = 1000 + 8 * i + i % 8;
    }
    if (r.kind == ExpectedKind::poison) r.seed = static_cast<std::uint64_t>(offset);
    expected.ranges.push_back(r);
    offset += r.range.size_bytes;
  }
  std::vector<std::byte> buffer(static_cast<std::size_t>(offset));
  std::vector<std::span<const std::byte>> views;
  std::vector<std::int64_t> want;
  for (std::size_t i = 0; i < expected.ranges.size(); ++i) {
    const ExpectedRange& r = expected.ranges[i];
    const std::span<std::byte> out =
        std::span(buffer).subspan(static_cast<std::size_t>(r.range.offset_bytes),
                                  static_cast<std::size_t>(r.range.size_bytes));
    make_expected(r, expected.rows.data(), out);
    const std::int64_t flip =
        i % 2 == 0 ? (static_cast<std::int64_t>(i) * 37) % r.range.size_bytes : -1;
    if (flip >= 0) out[static_cast<std::size_t>(flip)] ^= std::byte{0x20};
    want.push_back(flip);
    views.push_back(out);
  }
  {
    const Threads serial(1, 0);
    EXPECT_EQ(first_differences(expected, views), want);
  }
  const Threads t(4, 0);
  EXPECT_EQ(first_differences(expected, views), want);
}

} // namespace
} // namespace mc::model
