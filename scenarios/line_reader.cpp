// LineReader: memchr over a 64 KiB buffer; the line string is reused between calls.
#include "scenarios/line_reader.h"

#include "model/json_field.h"

#include <algorithm>
#include <cstring>

namespace mc::scenarios {

using model::fail_field;

namespace {
constexpr std::size_t kBufferBytes = std::size_t{64} << 10;
} // namespace

LineReader::LineReader(std::istream& in, std::size_t line_bytes_max)
    : in_(in), line_bytes_max_(line_bytes_max), buffer_(kBufferBytes) {}

bool LineReader::refill() {
  begin_ = 0;
  end_ = 0;
  if (in_.eof()) return false;
  in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  if (in_.bad()) fail_field("line", "read error after line {}", line_number_);
  end_ = static_cast<std::size_t>(in_.gcount());
  return end_ > 0;
}

bool LineReader::next(std::string& line) {
  line.clear();
  bool found_bytes = false;
  bool ended = false;
  while (!ended) {
    if (begin_ == end_ && !refill()) break;
    found_bytes = true;
    const char* start = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    const std::size_t take =
        newline != nullptr ? static_cast<std::size_t>(newline - start) : end_ - begin_;
    if (line.size() + take > line_bytes_max_) {
      ++line_number_; // the line being read is the one refused
      fail_field("line", "longer than {} bytes", line_bytes_max_);
    }
    // A NUL is in no text file: a binary file (or /dev/zero) stops here, at its first chunk.
    if (const auto* nul = static_cast<const char*>(std::memchr(start, '\0', take))) {
      ++line_number_;
      fail_field("line", "a NUL byte at column {} (not a text file)",
                 line.size() + static_cast<std::size_t>(nul - start) + 1);
    }
    line.append(start, take);
    begin_ += take;
    if (newline != nullptr) {
      ++begin_;
      ended = true;
    }
  }
  if (!found_bytes) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++line_number_;
  return true;
}

std::int32_t json_nesting_depth(std::string_view text) {
  std::int32_t depth = 0;
  std::int32_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

} // namespace mc::scenarios
