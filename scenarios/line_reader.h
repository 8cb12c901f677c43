// Bounded line reading for JSON Lines: one line at a time from a stream, through a fixed
// buffer, never holding more than one line (and never one longer than the limit).
//
// A line ends at "\n"; a "\r" before it is dropped (files edited on Windows); the last line
// may lack its "\n". A line over the limit is rejected as soon as the limit is passed, before
// the rest of it is read, and a line holding a NUL byte (a file that is not text) as soon as
// the NUL is read. json_nesting_depth lets the caller refuse deeply nested values
// before a recursive JSON parser sees them.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace mc::scenarios {

class LineReader {
public:
  LineReader(std::istream& in, std::size_t line_bytes_max);

  // The next line, without its terminator, into `line`; false at the end of the input.
  // Throws FieldError ("line") for a line over the limit, a NUL byte or a read error.
  bool next(std::string& line);
  // The number of the line returned last (1-based; 0 before the first).
  std::int64_t line_number() const { return line_number_; }

private:
  bool refill();

  std::istream& in_;
  std::size_t line_bytes_max_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::int64_t line_number_ = 0;
};

// The deepest nesting of [ and { outside strings.
std::int32_t json_nesting_depth(std::string_view text);

} // namespace mc::scenarios
