#include "model/touched_pages.h"

#include "model/errors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace mc::model {
namespace {

constexpr std::uint64_t kPresent = std::uint64_t{1} << 63;
constexpr std::uint64_t kSwapped = std::uint64_t{1} << 62;
constexpr std::int64_t kEntriesPerRead = 8192; // 64 KiB of pagemap, 32 MiB of memory

struct PageMap {
  int fd = -1;
  std::int64_t page = 4096;
};

// /proc/self/pagemap of the calling process, opened for one call. A descriptor kept open would
// still read the pagemap of the process that opened it after a fork: a forked child (each case
// of an isolated campaign is one) would be told that its own pages were never touched, and
// compare nothing.
class OpenPageMap {
public:
  explicit OpenPageMap(std::int64_t page) {
    map_.page = page;
    map_.fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  }
  ~OpenPageMap() {
    if (map_.fd >= 0) ::close(map_.fd);
  }
  OpenPageMap(const OpenPageMap&) = delete;
  OpenPageMap& operator=(const OpenPageMap&) = delete;
  bool is_open() const { return map_.fd >= 0; }
  const PageMap& get() const { return map_; }

private:
  PageMap map_;
};

// Entries of pages [first, first + count) into out; false when pagemap does not answer.
bool read_entries(const PageMap& map, std::uint64_t first, std::int64_t count, std::uint64_t* out) {
  const auto bytes = static_cast<std::size_t>(count) * sizeof(std::uint64_t);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(map.fd, reinterpret_cast<char*>(out) + done, bytes - done,
                              static_cast<off_t>(first * sizeof(std::uint64_t) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool touched(std::uint64_t entry) {
  return (entry & (kPresent | kSwapped)) != 0;
}

// The page size when pagemap answers truthfully (checked once, against a page written and a
// page never touched: a property of the kernel, the same in a forked child); nullopt when not.
const std::optional<std::int64_t>& page_map_page_bytes() {
  static const std::optional<std::int64_t> page_bytes = []() -> std::optional<std::int64_t> {
    const std::int64_t page = ::sysconf(_SC_PAGESIZE);
    if (page <= 0) return std::nullopt;
    const OpenPageMap map(page);
    if (!map.is_open()) return std::nullopt;
    const auto len = static_cast<std::size_t>(2 * page);
    void* probe = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED) return std::nullopt;
    (void)::madvise(probe, len, MADV_NOHUGEPAGE); // one written page must not map its neighbour
    static_cast<volatile char*>(probe)[0] = 1;
    std::array<std::uint64_t, 2> entries{};
    const bool answered = read_entries(
        map.get(), reinterpret_cast<std::uint64_t>(probe) / static_cast<std::uint64_t>(page), 2,
        entries.data());
    ::munmap(probe, len);
    if (!answered || !touched(entries[0]) || touched(entries[1])) return std::nullopt;
    return page;
  }();
  return page_bytes;
}

} // namespace

bool page_map_available() {
  return page_map_page_bytes().has_value();
}

std::vector<ByteSpan> touched_spans(const void* data, std::int64_t size) {
  MC_ASSERT(size >= 0);
  if (size == 0) return {};
  const std::optional<std::int64_t>& page_bytes = page_map_page_bytes();
  if (!page_bytes) return {{0, size}};
  const OpenPageMap map(*page_bytes);
  if (!map.is_open()) return {{0, size}};
  const auto page = static_cast<std::uint64_t>(*page_bytes);
  const auto begin = reinterpret_cast<std::uint64_t>(data);
  const std::uint64_t first_page = begin / page;
  const std::uint64_t end_page = (begin + static_cast<std::uint64_t>(size) + page - 1) / page;
  std::vector<std::uint64_t> entries(static_cast<std::size_t>(kEntriesPerRead));
  std::vector<ByteSpan> spans;
  const auto clip = [&](std::uint64_t p) {
    return static_cast<std::int64_t>(std::clamp(p * page, begin, begin + size) - begin);
  };
  std::int64_t run_begin = -1;
  for (std::uint64_t p = first_page; p < end_page; p += kEntriesPerRead) {
    const auto count =
        static_cast<std::int64_t>(std::min<std::uint64_t>(kEntriesPerRead, end_page - p));
    if (!read_entries(map.get(), p, count, entries.data())) return {{0, size}};
    for (std::int64_t i = 0; i < count; ++i) {
      const bool t = touched(entries[static_cast<std::size_t>(i)]);
      const std::uint64_t at = p + static_cast<std::uint64_t>(i);
      if (t && run_begin < 0) run_begin = clip(at);
      if (!t && run_begin >= 0) {
        spans.push_back({run_begin, clip(at) - run_begin});
        run_begin = -1;
      }
    }
  }
  if (run_begin >= 0) spans.push_back({run_begin, size - run_begin});
  return spans;
}

std::vector<ByteSpan> span_union(const std::vector<ByteSpan>& a, const std::vector<ByteSpan>& b) {
  std::vector<ByteSpan> all;
  all.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all),
             [](const ByteSpan& x, const ByteSpan& y) { return x.offset < y.offset; });
  std::vector<ByteSpan> out;
  for (const ByteSpan& s : all) {
    if (s.size == 0) continue;
    if (!out.empty() && s.offset <= out.back().end())
      out.back().size = std::max(out.back().end(), s.end()) - out.back().offset;
    else
      out.push_back(s);
  }
  return out;
}

} // namespace mc::model
