// NumPy .npy files for the integer arrays of case files (CASE_FORMAT.md).
//
// Written: format 1.0, little-endian, C order. Read: format 1.0, 2.0 and 3.0 headers.
// Only the dtypes case files use: int32 '<i4', int64 '<i8', uint64 '<u8', uint8 '|u1'.
// Reading checks everything a file can get wrong (magic, version, header dict, dtype,
// fortran_order, shape, file size) and throws InputError naming the file and the problem.
// Arenas can be many GiB and mostly untouched (model/arena.h), so data moves in chunks:
// writing turns all-zero chunks into holes of a sparse file, and reading leaves all-zero
// chunks unwritten so that a lazily mapped destination stays sparse; neither ever holds a
// second copy of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

enum class NpyDtype : std::uint8_t { int32, int64, uint64, uint8 };

std::string_view npy_descr(NpyDtype dtype); // "<i4", "<i8", "<u8", "|u1"
std::int64_t npy_elem_size(NpyDtype dtype);

template <typename T> struct NpyDtypeOf;
template <> struct NpyDtypeOf<std::int32_t> { static constexpr NpyDtype value = NpyDtype::int32; };
template <> struct NpyDtypeOf<std::int64_t> { static constexpr NpyDtype value = NpyDtype::int64; };
template <> struct NpyDtypeOf<std::uint64_t> {
  static constexpr NpyDtype value = NpyDtype::uint64;
};
template <> struct NpyDtypeOf<std::uint8_t> { static constexpr NpyDtype value = NpyDtype::uint8; };

// Limits on what a file may declare (STYLE.md: a limit on every size read from a file).
inline constexpr std::int64_t kNpyHeaderBytesMax = 1 << 20;
inline constexpr std::size_t kNpyRankMax = 8;
inline constexpr std::int64_t kNpyDataBytesMax = std::int64_t{1} << 42;     // 4 TiB
inline constexpr std::int64_t kNpyInMemoryBytesMax = std::int64_t{1} << 30; // read_npy<T>

struct NpyHeader {
  NpyDtype dtype = NpyDtype::uint8;
  std::vector<std::int64_t> shape;
  std::int64_t data_offset_bytes = 0; // where the data starts in the file

  std::int64_t num_elements() const;
  std::int64_t data_bytes() const { return num_elements() * npy_elem_size(dtype); }
};

// Python's repr of a shape tuple: "()", "(3,)", "(3, 4)".
std::string npy_shape_string(std::span<const std::int64_t> shape);

// Writes a format 1.0 file; `data` holds prod(shape) elements of `dtype` in C order.
// Throws InputError when the file cannot be created or written.
void write_npy(const std::filesystem::path& file, NpyDtype dtype,
               std::span<const std::int64_t> shape, std::span<const std::byte> data);

template <typename T>
void write_npy(const std::filesystem::path& file, std::span<const std::int64_t> shape,
               std::span<const T> values) {
  write_npy(file, NpyDtypeOf<T>::value, shape, std::as_bytes(values));
}

// Reads and checks the header of `file`: magic, version, the dict (descr, fortran_order
// False, shape), descr == `expected`, and that the file holds exactly the data the shape
// declares. Throws InputError ("case/arena_3.npy: dtype '<f4', expected '|u1'").
NpyHeader read_npy_header(const std::filesystem::path& file, NpyDtype expected);

// Throws InputError naming the file and both shapes unless header.shape == expected.
void expect_npy_shape(const std::filesystem::path& file, const NpyHeader& header,
                      std::span<const std::int64_t> expected);

// Reads the data of `file` (described by `header`, from read_npy_header) into `dst`, whose
// size is header.data_bytes(). `dst` must be zero-filled on entry: all-zero chunks of the
// file are skipped, so a fresh Arena stays sparse. Throws InputError if the file changed.
void read_npy_data(const std::filesystem::path& file, const NpyHeader& header,
                   std::span<std::byte> dst);

template <typename T> struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<T> values; // C order
};

// A whole array of at most kNpyInMemoryBytesMax bytes.
template <typename T> NpyArray<T> read_npy(const std::filesystem::path& file);
extern template NpyArray<std::int32_t> read_npy(const std::filesystem::path& file);
extern template NpyArray<std::int64_t> read_npy(const std::filesystem::path& file);
extern template NpyArray<std::uint64_t> read_npy(const std::filesystem::path& file);
extern template NpyArray<std::uint8_t> read_npy(const std::filesystem::path& file);

} // namespace mc::model
