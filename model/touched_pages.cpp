#include "model/touched_pages.h"

#include "model/errors.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <memory>
#include <utility>

namespace mc::model {
namespace {

constexpr std::uint64_t kPresent = std::uint64_t{1} << 63;
constexpr std::uint64_t kSwapped = std::uint64_t{1} << 62;
constexpr std::int64_t kEntriesPerRead = 8192; // 64 KiB of pagemap, 32 MiB of memory

// An open /proc/self/pagemap.
struct PageMap {
  int fd = -1;
  std::int64_t page = 4096;
  PageMap(const PageMap&) = delete;
  PageMap& operator=(const PageMap&) = delete;
  explicit PageMap(std::int64_t page_bytes)
      : fd(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)), page(page_bytes) {}
  ~PageMap() {
    if (fd >= 0) ::close(fd);
  }
};

// This process's pagemap, opened once per process and thread: a case worker asks several questions
// a case, and opening the file for each cost as much as reading it. Kept with the pid that opened
// it, since a descriptor inherited through fork answers for the parent's pages: a forked child
// opens its own.
const PageMap& own_page_map(std::int64_t page_bytes) {
  // A pointer, not std::optional: GCC 12 at -O2 cannot see that an empty optional's destructor
  // never reads the descriptor, and warns (-Wmaybe-uninitialized).
  thread_local std::unique_ptr<PageMap> map;
  thread_local pid_t owner = -1;
  if (owner != ::getpid() || !map || map->page != page_bytes) {
    map.reset(); // (a child closes only its copy of the parent's descriptor)
    map = std::make_unique<PageMap>(page_bytes);
    owner = ::getpid();
  }
  return *map;
}

// Entries of pages [first, first + count) into out; false when pagemap does not answer.
bool read_entries(const PageMap& map, std::uint64_t first, std::int64_t count,
                  std::uint64_t* out) {
  const auto bytes = static_cast<std::size_t>(count) * sizeof(std::uint64_t);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n =
        ::pread(map.fd, reinterpret_cast<char*>(out) + done, bytes - done,
                static_cast<off_t>(first * sizeof(std::uint64_t) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool touched(std::uint64_t entry) { return (entry & (kPresent | kSwapped)) != 0; }

// PAGEMAP_SCAN (Linux 6.7 and later): the kernel hands back runs of pages by category instead of
// one 8-byte entry a page, so a 5 GiB arena with a few pages written costs a few regions
// instead of 10 MiB of entries filled in for its holes. Declared here because the C library's
// headers may predate it; the layout is the kernel's ABI (include/uapi/linux/fs.h).
struct PageRegion {
  std::uint64_t start = 0, end = 0, categories = 0;
};
struct PageScanArg {
  std::uint64_t size = sizeof(PageScanArg);
  std::uint64_t flags = 0;
  std::uint64_t start = 0, end = 0, walk_end = 0;
  std::uint64_t vec = 0, vec_len = 0;
  std::uint64_t max_pages = 0;
  std::uint64_t category_inverted = 0, category_mask = 0, category_anyof_mask = 0;
  std::uint64_t return_mask = 0;
};
constexpr std::uint64_t kPageIsPresent = 1u << 3;
constexpr std::uint64_t kPageIsSwapped = 1u << 4;
constexpr unsigned long kPageMapScan = _IOWR('f', 16, PageScanArg);
constexpr std::size_t kRegionsPerCall = 512;

// Runs of touched pages of [begin, end) (page-aligned addresses) by PAGEMAP_SCAN, as absolute
// [start, end) address pairs in order; nullopt when the kernel does not have it.
std::optional<std::vector<std::pair<std::uint64_t, std::uint64_t>>>
scan_runs(int fd, std::uint64_t begin, std::uint64_t end) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;
  std::array<PageRegion, kRegionsPerCall> regions{};
  std::uint64_t at = begin;
  while (at < end) {
    PageScanArg arg;
    arg.start = at;
    arg.end = end;
    arg.vec = reinterpret_cast<std::uint64_t>(regions.data());
    arg.vec_len = regions.size();
    arg.category_anyof_mask = kPageIsPresent | kPageIsSwapped;
    arg.return_mask = kPageIsPresent | kPageIsSwapped;
    const long n = ::ioctl(fd, kPageMapScan, &arg);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    for (long i = 0; i < n; ++i) {
      const PageRegion& r = regions[static_cast<std::size_t>(i)];
      if (!runs.empty() && runs.back().second == r.start)
        runs.back().second = r.end; // a present run beside a swapped one
      else
        runs.emplace_back(r.start, r.end);
    }
    if (arg.walk_end <= at) return std::nullopt; // no progress: do not trust it
    at = arg.walk_end;
  }
  return runs;
}

// `pages` fresh pages of small-page anonymous memory with only page `written` written: what the
// trust checks below ask pagemap about (a huge page would map the written page's neighbours).
struct ProbePages {
  void* base = MAP_FAILED;
  std::size_t len = 0;
  ProbePages(const ProbePages&) = delete;
  ProbePages& operator=(const ProbePages&) = delete;
  ProbePages(std::int64_t page_bytes, std::int64_t pages, std::int64_t written)
      : len(static_cast<std::size_t>(pages * page_bytes)) {
    base = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return;
    (void)::madvise(base, len, MADV_NOHUGEPAGE);
    static_cast<volatile char*>(base)[written * page_bytes] = 1;
  }
  ~ProbePages() {
    if (base != MAP_FAILED) ::munmap(base, len);
  }
  bool mapped() const { return base != MAP_FAILED; }
  std::uint64_t address() const { return reinterpret_cast<std::uint64_t>(base); }
};

// The page size where pagemap answers truthfully: it told a written page from a never-touched
// one the first time it was asked (a property of the kernel, so it holds in forked children).
std::optional<std::int64_t> trusted_page_bytes() {
  static const std::optional<std::int64_t> page = []() -> std::optional<std::int64_t> {
    const std::int64_t bytes = ::sysconf(_SC_PAGESIZE);
    if (bytes <= 0) return std::nullopt;
    const PageMap m(bytes);
    if (m.fd < 0) return std::nullopt;
    const ProbePages probe(bytes, 2, 0);
    if (!probe.mapped()) return std::nullopt;
    std::array<std::uint64_t, 2> entries{};
    const bool answered =
        read_entries(m, probe.address() / static_cast<std::uint64_t>(bytes), 2, entries.data());
    if (!answered || !touched(entries[0]) || touched(entries[1])) return std::nullopt;
    return bytes;
  }();
  return page;
}

// Whether PAGEMAP_SCAN answers truthfully here: asked once, like the entries above, about a
// written page beside a never-touched one.
bool scan_trusted() {
  static const bool trusted = [] {
    const std::optional<std::int64_t> bytes = trusted_page_bytes();
    if (!bytes) return false;
    const PageMap m(*bytes);
    if (m.fd < 0) return false;
    const ProbePages probe(*bytes, 3, 1); // the middle page only
    if (!probe.mapped()) return false;
    const std::uint64_t begin = probe.address();
    const auto page = static_cast<std::uint64_t>(*bytes);
    const auto runs = scan_runs(m.fd, begin, begin + 3 * page);
    return runs && runs->size() == 1 && (*runs)[0].first == begin + page &&
           (*runs)[0].second == begin + 2 * page;
  }();
  return trusted;
}

} // namespace

bool page_map_available() { return trusted_page_bytes().has_value(); }

std::vector<ByteSpan> touched_spans(const void* data, std::int64_t size) {
  if (std::optional<std::vector<ByteSpan>> spans = scanned_spans(data, size)) return *spans;
  return entry_spans(data, size);
}

std::optional<std::vector<ByteSpan>> scanned_spans(const void* data, std::int64_t size) {
  MC_ASSERT(size >= 0);
  if (size == 0) return std::vector<ByteSpan>{};
  if (!scan_trusted()) return std::nullopt; // which implies trusted_page_bytes()
  const std::int64_t page_bytes = *trusted_page_bytes();
  const PageMap& map = own_page_map(page_bytes);
  if (map.fd < 0) return std::nullopt;
  const auto page = static_cast<std::uint64_t>(page_bytes);
  const auto begin = reinterpret_cast<std::uint64_t>(data);
  const std::uint64_t end = begin + static_cast<std::uint64_t>(size);
  const auto runs = scan_runs(map.fd, begin / page * page, (end + page - 1) / page * page);
  if (!runs) return std::nullopt;
  std::vector<ByteSpan> spans;
  spans.reserve(runs->size());
  for (const auto& [from, to] : *runs) {
    const std::uint64_t lo = std::max(from, begin), hi = std::min(to, end);
    if (lo < hi)
      spans.push_back({static_cast<std::int64_t>(lo - begin), static_cast<std::int64_t>(hi - lo)});
  }
  return spans;
}

std::vector<ByteSpan> entry_spans(const void* data, std::int64_t size) {
  MC_ASSERT(size >= 0);
  if (size == 0) return {};
  const std::optional<std::int64_t> page_bytes = trusted_page_bytes();
  if (!page_bytes) return {{0, size}};
  const PageMap& map = own_page_map(*page_bytes);
  if (map.fd < 0) return {{0, size}};
  const auto page = static_cast<std::uint64_t>(*page_bytes);
  const auto begin = reinterpret_cast<std::uint64_t>(data);
  const std::uint64_t first_page = begin / page;
  const std::uint64_t end_page = (begin + static_cast<std::uint64_t>(size) + page - 1) / page;
  std::vector<std::uint64_t> entries(
      static_cast<std::size_t>(std::min<std::uint64_t>(kEntriesPerRead, end_page - first_page)));
  std::vector<ByteSpan> spans;
  const auto clip = [&](std::uint64_t p) {
    return static_cast<std::int64_t>(std::clamp(p * page, begin, begin + size) - begin);
  };
  std::int64_t run_begin = -1;
  for (std::uint64_t p = first_page; p < end_page; p += kEntriesPerRead) {
    const auto count = static_cast<std::int64_t>(
        std::min<std::uint64_t>(kEntriesPerRead, end_page - p));
    if (!read_entries(map, p, count, entries.data())) return {{0, size}};
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

} // namespace mc::model
