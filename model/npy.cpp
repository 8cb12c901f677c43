#include "model/npy.h"

#include "model/errors.h"
#include "model/touched_pages.h"

#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

namespace mc::model {
namespace {

static_assert(std::endian::native == std::endian::little,
              "case files are little-endian; a big-endian host would need byte swaps");

constexpr std::array<char, 6> kMagic = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kPrefixBytesV1 = 10; // magic, major, minor, uint16 header length
constexpr std::size_t kPrefixBytesV2 = 12; // magic, major, minor, uint32 header length
constexpr std::size_t kHeaderAlign = 64;   // numpy aligns the data start to 64 bytes
constexpr std::int64_t kChunkBytes = std::int64_t{1} << 20;
constexpr std::int64_t kHoleBytes = std::int64_t{1} << 16; // zero test granularity

std::string errno_text() {
  return std::generic_category().message(errno);
}

// An open file descriptor, closed on scope exit.
// A write that failed: a full disk or a file size limit is the machine's (exit 3); anything
// else (a path that cannot be written) the user's (exit 2).
[[noreturn]] void fail_write(const std::filesystem::path& file) {
  const int error = errno;
  const std::string what = fmt::format("{}: cannot write: {}", file.string(), errno_text());
  if (error == ENOSPC || error == EFBIG || error == EDQUOT || error == EIO)
    throw EnvironmentError(what);
  throw InputError(what);
}

class Fd {
public:
  Fd(const std::filesystem::path& file, int flags) : fd_(::open(file.c_str(), flags, 0644)) {
    if (fd_ < 0) fail_input("{}: cannot open: {}", file.string(), errno_text());
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Close and report a failure (a write may only fail at close on some file systems).
  void close(const std::filesystem::path& file) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_write(file);
  }

private:
  int fd_ = -1;
};

void write_at(const Fd& fd, const std::filesystem::path& file, const std::byte* data,
              std::int64_t size, std::int64_t offset) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd.get(), data, static_cast<std::size_t>(size), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_write(file);
    data += n;
    size -= n;
    offset += n;
  }
}

// Reads exactly `size` bytes at `offset`; fewer means the file shrank after its header
// was checked.
void read_at(const Fd& fd, const std::filesystem::path& file, std::byte* data, std::int64_t size,
             std::int64_t offset) {
  while (size > 0) {
    const ssize_t n = ::pread(fd.get(), data, static_cast<std::size_t>(size), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_input("{}: cannot read: {}", file.string(), errno_text());
    if (n == 0) fail_input("{}: truncated while reading (the file changed)", file.string());
    data += n;
    size -= n;
    offset += n;
  }
}

std::int64_t file_size(const Fd& fd, const std::filesystem::path& file) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_input("{}: cannot stat: {}", file.string(), errno_text());
  if (!S_ISREG(st.st_mode)) fail_input("{}: not a regular file", file.string());
  return static_cast<std::int64_t>(st.st_size);
}

bool all_zero(const std::byte* data, std::int64_t size) {
  if (size == 0) return true;
  return data[0] == std::byte{0} &&
         std::memcmp(data, data + 1, static_cast<std::size_t>(size - 1)) == 0;
}

struct DtypeInfo {
  NpyDtype dtype;
  std::string_view descr;
  std::int64_t elem_size;
};
constexpr DtypeInfo kDtypes[] = {
    {NpyDtype::int32, "<i4", 4},
    {NpyDtype::int64, "<i8", 8},
    {NpyDtype::uint64, "<u8", 8},
    {NpyDtype::uint8, "|u1", 1},
};

const DtypeInfo& dtype_info(NpyDtype dtype) {
  for (const DtypeInfo& info : kDtypes)
    if (info.dtype == dtype) return info;
  MC_ASSERT(false);
  return kDtypes[0];
}

std::optional<NpyDtype> dtype_from_descr(std::string_view descr) {
  for (const DtypeInfo& info : kDtypes)
    if (info.descr == descr) return info.dtype;
  return std::nullopt;
}

// Elements of `shape`, or nullopt when their bytes would pass kNpyDataBytesMax.
std::optional<std::int64_t> checked_num_elements(std::span<const std::int64_t> shape,
                                                 std::int64_t elem_size) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    MC_ASSERT(d >= 0);
    if (d == 0) return 0;
  }
  for (const std::int64_t d : shape) {
    if (n > kNpyDataBytesMax / elem_size / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string header_text(NpyDtype dtype, std::span<const std::int64_t> shape) {
  std::string text = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 npy_descr(dtype), npy_shape_string(shape));
  // Pad with spaces and end with a newline so that the data starts 64-byte aligned.
  const std::size_t total = kPrefixBytesV1 + text.size() + 1;
  text.append((kHeaderAlign - total % kHeaderAlign) % kHeaderAlign, ' ');
  text.push_back('\n');
  return text;
}

// The header dict, a Python literal such as
// {'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
public:
  HeaderParser(const std::filesystem::path& file, std::string_view text)
      : file_(file), text_(text) {}

  struct Fields {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  Fields parse() {
    Fields fields;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect("{");
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string("a key");
      skip_space();
      expect(":");
      skip_space();
      if (key == "descr") {
        mark_seen(seen_descr, key);
        fields.descr = parse_string("'descr' (a dtype string)");
      } else if (key == "fortran_order") {
        mark_seen(seen_order, key);
        fields.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(seen_shape, key);
        fields.shape = parse_shape();
      } else {
        fail("unexpected key '{}' (expected descr, fortran_order, shape)", key);
      }
      skip_space();
      if (accept(",")) continue;
      if (peek() != '}') fail("expected ',' or '}}' at offset {}", pos_);
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the dict at offset {}", pos_);
    if (!seen_descr) fail("key 'descr' is missing");
    if (!seen_order) fail("key 'fortran_order' is missing");
    if (!seen_shape) fail("key 'shape' is missing");
    return fields;
  }

private:
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    fail_input("{}: header: {}", file_.string(), fmt::format(format, std::forward<Args>(args)...));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  // Consumes `word` when the text goes on with it.
  bool accept(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void expect(std::string_view word) {
    if (!accept(word)) fail("expected '{}' at offset {}", word, pos_);
  }
  void mark_seen(bool& seen, const std::string& key) {
    if (seen) fail("key '{}' appears twice", key);
    seen = true;
  }
  std::string parse_string(std::string_view what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected {} at offset {}", what, pos_);
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos || end - pos_ > 64)
      fail("unterminated or overlong string at offset {}", pos_);
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    if (accept("True")) return true;
    if (accept("False")) return false;
    fail("'fortran_order' must be True or False at offset {}", pos_);
  }
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect("(");
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (shape.size() == kNpyRankMax) fail("shape has more than {} dimensions", kNpyRankMax);
      shape.push_back(parse_dim());
      skip_space();
      if (accept(",")) continue;
      if (peek() != ')') fail("expected ',' or ')' in the shape at offset {}", pos_);
    }
    ++pos_;
    // "(3)" is not a tuple in Python; numpy always writes "(3,)".
    return shape;
  }
  std::int64_t parse_dim() {
    if (peek() < '0' || peek() > '9') fail("expected a dimension at offset {}", pos_);
    std::int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + (peek() - '0');
      if (value > kNpyDataBytesMax) fail("dimension larger than {}", kNpyDataBytesMax);
      ++pos_;
    }
    accept("L"); // Python 2 longs in old files
    return value;
  }

  const std::filesystem::path& file_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct Prefix {
  int major = 0;
  std::int64_t header_bytes = 0;
  std::int64_t prefix_bytes = 0;
};

Prefix read_prefix(const Fd& fd, const std::filesystem::path& file, std::int64_t size) {
  if (size < static_cast<std::int64_t>(kPrefixBytesV1))
    fail_input("{}: truncated: {} bytes, too short for an .npy header", file.string(), size);
  std::array<unsigned char, kPrefixBytesV2> p{};
  const std::int64_t n = std::min<std::int64_t>(size, kPrefixBytesV2);
  read_at(fd, file, reinterpret_cast<std::byte*>(p.data()), n, 0);
  if (std::memcmp(p.data(), kMagic.data(), kMagic.size()) != 0)
    fail_input("{}: not an .npy file (bad magic)", file.string());
  Prefix prefix{.major = p[6]};
  if (p[6] < 1 || p[6] > 3 || p[7] != 0)
    fail_input("{}: .npy format version {}.{} is not supported (1.0, 2.0, 3.0 are)", file.string(),
               p[6], p[7]);
  if (prefix.major == 1) {
    prefix.header_bytes = p[8] | (p[9] << 8);
    prefix.prefix_bytes = kPrefixBytesV1;
  } else {
    if (n < static_cast<std::int64_t>(kPrefixBytesV2))
      fail_input("{}: truncated: {} bytes, too short for an .npy header", file.string(), size);
    prefix.header_bytes = std::int64_t{p[8]} | (std::int64_t{p[9]} << 8) |
                          (std::int64_t{p[10]} << 16) | (std::int64_t{p[11]} << 24);
    prefix.prefix_bytes = kPrefixBytesV2;
  }
  if (prefix.header_bytes > kNpyHeaderBytesMax)
    fail_input("{}: header of {} bytes (at most {})", file.string(), prefix.header_bytes,
               kNpyHeaderBytesMax);
  if (prefix.prefix_bytes + prefix.header_bytes > size)
    fail_input("{}: truncated: {} bytes, the header alone needs {}", file.string(), size,
               prefix.prefix_bytes + prefix.header_bytes);
  return prefix;
}

} // namespace

std::string_view npy_descr(NpyDtype dtype) {
  return dtype_info(dtype).descr;
}

std::int64_t npy_elem_size(NpyDtype dtype) {
  return dtype_info(dtype).elem_size;
}

std::int64_t NpyHeader::num_elements() const {
  const std::optional<std::int64_t> n = checked_num_elements(shape, npy_elem_size(dtype));
  MC_ASSERT(n.has_value());
  return *n;
}

std::string npy_shape_string(std::span<const std::int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

void write_npy(const std::filesystem::path& file, NpyDtype dtype,
               std::span<const std::int64_t> shape, std::span<const std::byte> data) {
  MC_ASSERT(shape.size() <= kNpyRankMax);
  const std::int64_t elem_size = npy_elem_size(dtype);
  const std::optional<std::int64_t> n = checked_num_elements(shape, elem_size);
  MC_ASSERT(n.has_value());
  MC_ASSERT(static_cast<std::int64_t>(data.size()) == *n * elem_size);
  const std::string header = header_text(dtype, shape);
  const std::int64_t header_bytes = static_cast<std::int64_t>(header.size());
  MC_ASSERT(header_bytes <= 0xFFFF);
  std::array<std::byte, kPrefixBytesV1> prefix{};
  std::memcpy(prefix.data(), kMagic.data(), kMagic.size());
  prefix[6] = std::byte{1};
  prefix[7] = std::byte{0};
  prefix[8] = static_cast<std::byte>(header_bytes & 0xFF);
  prefix[9] = static_cast<std::byte>(header_bytes >> 8);

  Fd fd(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
  write_at(fd, file, prefix.data(), kPrefixBytesV1, 0);
  write_at(fd, file, reinterpret_cast<const std::byte*>(header.data()), header_bytes,
           kPrefixBytesV1);
  const std::int64_t data_offset = static_cast<std::int64_t>(kPrefixBytesV1) + header_bytes;
  const std::int64_t size = static_cast<std::int64_t>(data.size());
  // Pages never touched and all-zero chunks are left as holes: a sparse arena stays sparse on
  // disk, and its untouched pages are never read (model/touched_pages.h).
  for (const ByteSpan& span : touched_spans(data.data(), size)) {
    for (std::int64_t off = span.offset; off < span.end(); off += kHoleBytes) {
      const std::int64_t len = std::min(kHoleBytes, span.end() - off);
      if (!all_zero(data.data() + off, len))
        write_at(fd, file, data.data() + off, len, data_offset + off);
    }
  }
  if (::ftruncate(fd.get(), data_offset + size) != 0) fail_write(file);
  fd.close(file);
}

NpyHeader read_npy_header(const std::filesystem::path& file, NpyDtype expected) {
  Fd fd(file, O_RDONLY | O_CLOEXEC);
  const std::int64_t size = file_size(fd, file);
  const Prefix prefix = read_prefix(fd, file, size);
  std::string text(static_cast<std::size_t>(prefix.header_bytes), '\0');
  read_at(fd, file, reinterpret_cast<std::byte*>(text.data()), prefix.header_bytes,
          prefix.prefix_bytes);
  const HeaderParser::Fields fields = HeaderParser(file, text).parse();
  const std::optional<NpyDtype> dtype = dtype_from_descr(fields.descr);
  if (!dtype.has_value() || *dtype != expected)
    fail_input("{}: dtype '{}', expected '{}'", file.string(), fields.descr, npy_descr(expected));
  if (fields.fortran_order)
    fail_input("{}: fortran_order is True, only C order is supported", file.string());
  const std::optional<std::int64_t> n = checked_num_elements(fields.shape, npy_elem_size(*dtype));
  if (!n.has_value())
    fail_input("{}: shape {} holds more than {} bytes", file.string(),
               npy_shape_string(fields.shape), kNpyDataBytesMax);
  NpyHeader header{.dtype = *dtype,
                   .shape = fields.shape,
                   .data_offset_bytes = prefix.prefix_bytes + prefix.header_bytes};
  const std::int64_t expected_size = header.data_offset_bytes + header.data_bytes();
  if (size != expected_size)
    fail_input("{}: {}: file has {} bytes, shape {} of '{}' needs {}", file.string(),
               size < expected_size ? "truncated" : "trailing bytes", size,
               npy_shape_string(header.shape), fields.descr, expected_size);
  return header;
}

void expect_npy_shape(const std::filesystem::path& file, const NpyHeader& header,
                      std::span<const std::int64_t> expected) {
  if (!std::equal(header.shape.begin(), header.shape.end(), expected.begin(), expected.end()))
    fail_input("{}: shape {}, expected {}", file.string(), npy_shape_string(header.shape),
               npy_shape_string(expected));
}

void read_npy_data(const std::filesystem::path& file, const NpyHeader& header,
                   std::span<std::byte> dst) {
  const std::int64_t size = header.data_bytes();
  MC_ASSERT(static_cast<std::int64_t>(dst.size()) == size);
  Fd fd(file, O_RDONLY | O_CLOEXEC);
  if (file_size(fd, file) != header.data_offset_bytes + size)
    fail_input("{}: the file changed while it was read", file.string());
  std::vector<std::byte> chunk(static_cast<std::size_t>(std::min(kChunkBytes, size)));
  std::int64_t pos = 0;
  while (pos < size) {
    // Skip holes of a sparse file: they read as zeros, which dst already holds.
    const off_t data =
        ::lseek(fd.get(), static_cast<off_t>(header.data_offset_bytes + pos), SEEK_DATA);
    if (data < 0 && errno == ENXIO) break; // only a hole is left
    if (data > header.data_offset_bytes + pos) {
      pos = std::min(size, (static_cast<std::int64_t>(data) - header.data_offset_bytes) /
                               kHoleBytes * kHoleBytes);
      if (pos >= size) break;
    }
    const std::int64_t len = std::min(kChunkBytes, size - pos);
    read_at(fd, file, chunk.data(), len, header.data_offset_bytes + pos);
    for (std::int64_t off = 0; off < len; off += kHoleBytes) {
      const std::int64_t n = std::min(kHoleBytes, len - off);
      if (!all_zero(chunk.data() + off, n))
        std::memcpy(dst.data() + pos + off, chunk.data() + off, static_cast<std::size_t>(n));
    }
    pos += len;
  }
}

template <typename T> NpyArray<T> read_npy(const std::filesystem::path& file) {
  const NpyHeader header = read_npy_header(file, NpyDtypeOf<T>::value);
  if (header.data_bytes() > kNpyInMemoryBytesMax)
    fail_input("{}: {} bytes of data, at most {} are read into memory", file.string(),
               header.data_bytes(), kNpyInMemoryBytesMax);
  NpyArray<T> array{.shape = header.shape};
  array.values.assign(static_cast<std::size_t>(header.num_elements()), T{0});
  read_npy_data(file, header, std::as_writable_bytes(std::span<T>(array.values)));
  return array;
}

template NpyArray<std::int32_t> read_npy(const std::filesystem::path& file);
template NpyArray<std::int64_t> read_npy(const std::filesystem::path& file);
template NpyArray<std::uint64_t> read_npy(const std::filesystem::path& file);
template NpyArray<std::uint8_t> read_npy(const std::filesystem::path& file);

} // namespace mc::model
