// .npy files: the exact bytes numpy writes, round trips, the headers of versions 2 and 3,
// every malformed file rejected with a message naming the file, and sparse multi-GiB arenas.
#include "model/arena.h"
#include "model/errors.h"
#include "model/npy.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace mc::model {
namespace {

using testing::TempDir;

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A raw .npy file: prefix of `major`.0, the given header text, then `data_bytes` bytes.
std::string raw_npy(int major, const std::string& header, std::size_t data_bytes) {
  std::string s = "\x93NUMPY";
  s.push_back(static_cast<char>(major));
  s.push_back('\0');
  const std::size_t len = header.size();
  s.push_back(static_cast<char>(len & 0xFF));
  s.push_back(static_cast<char>((len >> 8) & 0xFF));
  if (major >= 2) {
    s.push_back(static_cast<char>((len >> 16) & 0xFF));
    s.push_back(static_cast<char>((len >> 24) & 0xFF));
  }
  s += header;
  s.append(data_bytes, '\x01');
  return s;
}

// The message of the InputError `read` throws; fails the test if it throws nothing.
template <typename F> std::string error_of(F read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(Npy, WritesTheBytesNumpyWrites) {
  TempDir tmp;
  const std::vector<std::int32_t> v = {1, -2, 3, 4, 5, 0x7FFFFFFF};
  const std::vector<std::int64_t> shape = {2, 3};
  write_npy<std::int32_t>(tmp.path() / "a.npy", shape, v);
  const std::string bytes = read_file(tmp.path() / "a.npy");
  // numpy 1.24: np.save("a.npy", np.array([[1, -2, 3], [4, 5, 2**31 - 1]], "<i4"))
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes.substr(0, 128), std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header);
  EXPECT_EQ(bytes.substr(128, 8), std::string("\x01\x00\x00\x00\xfe\xff\xff\xff", 8));
}

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  TempDir tmp;
  const auto file = tmp.path() / "x.npy";
  const std::vector<std::uint64_t> u64 = {0, 1, std::uint64_t{1} << 63, ~std::uint64_t{0}};
  write_npy<std::uint64_t>(file, std::vector<std::int64_t>{4}, u64);
  EXPECT_EQ(read_npy<std::uint64_t>(file).values, u64);
  EXPECT_EQ(read_npy<std::uint64_t>(file).shape, (std::vector<std::int64_t>{4}));

  const std::vector<std::int64_t> i64 = {-1, std::int64_t{1} << 40, 7, 8, 9, 10, 11, 12};
  write_npy<std::int64_t>(file, std::vector<std::int64_t>{2, 2, 2}, i64);
  EXPECT_EQ(read_npy<std::int64_t>(file).values, i64);
  EXPECT_EQ(read_npy<std::int64_t>(file).shape, (std::vector<std::int64_t>{2, 2, 2}));

  const std::vector<std::uint8_t> u8 = {0, 255, 3};
  write_npy<std::uint8_t>(file, std::vector<std::int64_t>{1, 3}, u8);
  EXPECT_EQ(read_npy<std::uint8_t>(file).values, u8);
  EXPECT_EQ(read_file(file).substr(10, 29), "{'descr': '|u1', 'fortran_ord");

  write_npy<std::int32_t>(file, std::vector<std::int64_t>{0, 5}, std::vector<std::int32_t>{});
  EXPECT_EQ(read_npy<std::int32_t>(file).shape, (std::vector<std::int64_t>{0, 5}));
  write_npy<std::int32_t>(file, std::vector<std::int64_t>{}, std::vector<std::int32_t>{42});
  EXPECT_EQ(read_npy<std::int32_t>(file).values, std::vector<std::int32_t>{42});
  EXPECT_TRUE(read_npy<std::int32_t>(file).shape.empty());
}

TEST(Npy, ReadsVersion2And3HeadersInAnyKeyOrder) {
  TempDir tmp;
  const auto file = tmp.path() / "v.npy";
  write_file(file, raw_npy(2, "{\"shape\": (2,), 'fortran_order': False, 'descr': '<i8'}\n", 16));
  EXPECT_EQ(read_npy<std::int64_t>(file).values,
            (std::vector<std::int64_t>{0x0101010101010101, 0x0101010101010101}));
  write_file(file, raw_npy(3, "{'descr':'<u8','fortran_order':False,'shape':(1,1,),}   \n", 8));
  EXPECT_EQ(read_npy<std::uint64_t>(file).shape, (std::vector<std::int64_t>{1, 1}));
}

TEST(Npy, RejectsMalformedFilesNamingFileAndProblem) {
  TempDir tmp;
  const auto file = tmp.path() / "arena_3.npy";
  const std::string name = file.string();
  const std::string good = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }\n";
  const auto read = [&] { read_npy<std::uint8_t>(file); };
  struct Bad {
    std::string bytes;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {raw_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24),
       name + ": dtype '<f4', expected '|u1'"},
      {raw_npy(1, good, 5), name + ": truncated: file has"},
      {raw_npy(1, good, 7), name + ": trailing bytes"},
      {raw_npy(1, good, 6).substr(0, 30), name + ": truncated: 30 bytes, the header alone needs"},
      {"\x93NUMP", name + ": truncated: 5 bytes, too short"},
      {"PK\x03\x04 this is a zip file", name + ": not an .npy file (bad magic)"},
      {raw_npy(4, good, 6), name + ": .npy format version 4.0 is not supported"},
      {raw_npy(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }\n", 6),
       name + ": fortran_order is True"},
      {raw_npy(1, "{'descr': '|u1', 'shape': (6,), }\n", 6),
       name + ": header: key 'fortran_order' is missing"},
      {raw_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (6,), 'x': 1}\n", 6),
       name + ": header: unexpected key 'x'"},
      {raw_npy(1, "{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, 'shape': (6,)}", 6),
       name + ": header: key 'descr' appears twice"},
      {raw_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6)}", 6),
       name + ": header: shape has more than 8 dimensions"},
      {raw_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4398046511104, 2)}", 6),
       name + ": shape (4398046511104, 2) holds more than"},
      {raw_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999)}", 6),
       name + ": header: dimension larger than"},
      {raw_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': [2, 3]}", 6),
       name + ": header: expected '('"},
      {raw_npy(1, "not a dict at all", 6), name + ": header: expected '{'"},
      {raw_npy(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,)}", 8),
       name + ": header: expected 'descr' (a dtype string)"},
      {raw_npy(1, good + "x", 6), name + ": header: unexpected text after the dict"},
      {raw_npy(2, std::string(2 << 20, ' '), 0), name + ": header of 2097152 bytes (at most"},
  };
  for (const Bad& b : bad) {
    write_file(file, b.bytes);
    const std::string message = error_of(read);
    EXPECT_EQ(message.rfind(b.message, 0), 0u) << "got: " << message << "\nwant: " << b.message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  std::filesystem::remove(file);
  EXPECT_EQ(error_of(read), name + ": cannot open: No such file or directory");
}

TEST(Npy, ExpectShapeNamesBothShapes) {
  TempDir tmp;
  const auto file = tmp.path() / "t.npy";
  write_npy<std::int32_t>(file, std::vector<std::int64_t>{4, 6}, std::vector<std::int32_t>(24));
  const NpyHeader header = read_npy_header(file, NpyDtype::int32);
  EXPECT_EQ(error_of([&] {
              expect_npy_shape(file, header, std::vector<std::int64_t>{4, 8});
            }),
            file.string() + ": shape (4, 6), expected (4, 8)");
  EXPECT_EQ(npy_shape_string(std::vector<std::int64_t>{}), "()");
  EXPECT_EQ(npy_shape_string(std::vector<std::int64_t>{7}), "(7,)");
}

std::int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

std::int64_t touched_bytes(const Arena& a) {
  std::int64_t n = 0;
  for (const ByteSpan& s : a.touched()) n += s.size;
  return n;
}

// A 5 GiB arena, written where nothing is past 2^32: the file stays sparse, neither
// direction holds a second copy, and every byte comes back. Both arenas ask for transparent
// huge pages, which is what a host with THP "always" does to every mapping: there a read of an
// untouched page can back 2 MiB with memory, so the writer and the reader must not read pages
// nothing wrote (checked page by page through pagemap where it answers, and by resident
// memory everywhere).
TEST(Npy, SparseArenaPastFourGiBNeverHeldTwice) {
  TempDir tmp;
  const auto file = tmp.path() / "arena_0.npy";
  const std::int64_t page = 4096;
  const std::int64_t blocks = (std::int64_t{5} << 30) / page + 1;
  const std::vector<std::int64_t> shape = {blocks, page};
  const std::int64_t far = (std::int64_t{1} << 32) + 12345;
  {
    Arena a(blocks * page);
    (void)::madvise(a.data(), static_cast<std::size_t>(a.size_bytes()), MADV_HUGEPAGE);
    a.poison_range(far, 3000);
    a.poison_range(0, 100);
    a.data()[a.size_bytes() - 1] = std::byte{42};
    const std::int64_t touched_before = touched_bytes(a);
    const std::int64_t rss_before = rss_bytes();
    write_npy(file, NpyDtype::uint8, shape, a.bytes());
    EXPECT_LT(rss_bytes() - rss_before, std::int64_t{64} << 20);
    if (page_map_available()) {
      EXPECT_EQ(touched_bytes(a), touched_before) << "writing read pages nothing wrote";
    }
  }
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 128 + blocks * page);
  EXPECT_LT(st.st_blocks * 512, std::int64_t{16} << 20) << "the file is not sparse";

  const NpyHeader header = read_npy_header(file, NpyDtype::uint8);
  expect_npy_shape(file, header, shape);
  Arena b(blocks * page);
  (void)::madvise(b.data(), static_cast<std::size_t>(b.size_bytes()), MADV_HUGEPAGE);
  const std::int64_t rss_before = rss_bytes();
  read_npy_data(file, header, b.bytes());
  EXPECT_LT(rss_bytes() - rss_before, std::int64_t{64} << 20);
  // Three written ranges; under THP each can back up to two huge pages where the arena is not
  // 2 MiB aligned (AddressSanitizer's allocator does not align it), so 16 MiB, not gigabytes.
  if (page_map_available()) {
    EXPECT_LE(touched_bytes(b), std::int64_t{16} << 20);
  }
  for (std::int64_t i = 0; i < 3000; ++i)
    ASSERT_EQ(static_cast<std::uint8_t>(b.data()[far + i]), poison_byte(far + i)) << i;
  EXPECT_EQ(static_cast<std::uint8_t>(b.data()[far - 1]), 0);
  EXPECT_EQ(static_cast<std::uint8_t>(b.data()[99]), poison_byte(99));
  EXPECT_EQ(static_cast<std::uint8_t>(b.data()[b.size_bytes() - 1]), 42);
}

} // namespace
} // namespace mc::model
