// Field: typed access to one JSON value of an input file, with its path in every error.
#include "model/json_field.h"

#include "model/errors.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mc::model {
namespace {

using Json = nlohmann::json;

// Where the byte at `index` of `text` is, as a reader of the text counts (1-based).
std::string position_at(std::string_view text, std::size_t index, JsonText kind) {
  index = std::min(index, text.size());
  const std::size_t line_start = text.rfind('\n', index == 0 ? 0 : index - 1);
  const bool first_line = line_start == std::string_view::npos || index == 0;
  const std::size_t column = first_line ? index + 1 : index - line_start;
  if (kind == JsonText::line) return fmt::format("column {}", column);
  const auto line =
      std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(index), '\n');
  return fmt::format("line {}, column {}", line + 1, column);
}

// The path of the value the parser was reading when it failed, found by parsing `text` again
// with a callback that follows objects, keys and array elements ("" outside any value).
std::string failing_path(std::string_view text) {
  struct Level {
    bool array = false;
    std::string key;
    std::size_t index = 0; // of the array element being read
  };
  std::vector<Level> levels;
  // A value has been read whole: the next one is the array's next element, or waits for its key.
  const auto element_done = [&levels] {
    if (levels.empty()) return;
    if (levels.back().array)
      ++levels.back().index;
    else
      levels.back().key.clear();
  };
  const Json::parser_callback_t follow = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
    case Json::parse_event_t::object_start:
      levels.push_back({});
      break;
    case Json::parse_event_t::array_start:
      levels.push_back({.array = true});
      break;
    case Json::parse_event_t::key:
      levels.back().key = parsed.get<std::string>();
      break;
    case Json::parse_event_t::object_end:
    case Json::parse_event_t::array_end:
      levels.pop_back();
      element_done();
      break;
    case Json::parse_event_t::value:
      element_done();
      break;
    }
    return true;
  };
  try {
    Json::parse(text, follow).clear(); // only what the callback followed matters
  } catch (const Json::exception&) {
    std::string path;
    for (const Level& level : levels) {
      if (level.array)
        path += fmt::format("[{}]", level.index);
      else if (!level.key.empty())
        path += path.empty() ? level.key : "." + level.key;
    }
    return path;
  }
  return {}; // not reached: the text failed once already
}

// nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 9: syntax
// error while parsing value - invalid literal; last read: '1} g'; expected end of input". The
// parts after " - ": what went wrong and what was expected.
struct SyntaxError {
  std::string what;
  std::string expected;
};

SyntaxError split_syntax_error(std::string_view message) {
  SyntaxError e;
  const std::size_t dash = message.find(" - ");
  std::string_view rest = dash == std::string_view::npos ? message : message.substr(dash + 3);
  if (const std::size_t at = rest.rfind("; expected "); at != std::string_view::npos) {
    e.expected = rest.substr(at + 11);
    rest = rest.substr(0, at);
  }
  if (const std::size_t at = rest.find("; last read: "); at != std::string_view::npos)
    rest = rest.substr(0, at);
  e.what = rest;
  return e;
}

std::string syntax_reason(const Json::parse_error& error, std::string_view text, JsonText kind) {
  // byte: how many bytes the parser had read, so the last of them is where it stopped.
  const std::size_t stopped = error.byte == 0 ? 0 : error.byte - 1;
  const std::string where = position_at(text, stopped, kind);
  const SyntaxError e = split_syntax_error(error.what());
  const std::string_view one = kind == JsonText::line ? "per line" : "in the file";
  if (e.expected == "end of input")
    return fmt::format("text after the end of the JSON value, at {} (one value {})", where, one);
  if (e.what == "unexpected end of input")
    return fmt::format("the JSON value is cut short: the {} ends at {}",
                       kind == JsonText::line ? "line" : "file",
                       position_at(text, text.empty() ? 0 : text.size() - 1, kind));
  // The parser's "last read" text runs from the token before the fault, which misleads more
  // than the column helps: it is left out.
  std::string reason = fmt::format("not valid JSON at {}: {}", where, e.what);
  if (!e.expected.empty()) reason += fmt::format("; expected {}", e.expected);
  return reason;
}

// The quoted number of "number overflow parsing '1e400'".
std::string overflowing_number(std::string_view message) {
  const std::size_t open = message.find('\'');
  const std::size_t close = message.rfind('\'');
  if (open == std::string_view::npos || close <= open) return "a number";
  return std::string(message.substr(open + 1, close - open - 1));
}

[[noreturn]] void fail_at_path(std::string_view text, std::string reason) {
  const std::string path = failing_path(text);
  throw FieldError(path.empty() ? "json" : path, std::move(reason));
}

} // namespace

nlohmann::json parse_json_text(std::string_view text, JsonText kind,
                               const nlohmann::json::parser_callback_t& callback) {
  // The parser would take a NUL for the end of the text and accept what came before it.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail_field("json", "a NUL byte at {} (JSON is text)", position_at(text, nul, kind));
  try {
    return Json::parse(text, callback);
  } catch (const Json::parse_error& e) {
    fail_at_path(text, syntax_reason(e, text, kind));
  } catch (const Json::out_of_range& e) {
    // 406, the one range error of parsing: a number past the largest double.
    fail_at_path(text, fmt::format("the number {} is too large (beyond a 64-bit float)",
                                   overflowing_number(e.what())));
  } catch (const Json::exception& e) {
    std::string what = e.what();
    if (const std::size_t cut = what.find("] "); cut != std::string::npos) what.erase(0, cut + 2);
    fail_field("json", "not valid JSON: {}", what);
  }
}

std::string Field::path() const {
  if (parent_ == nullptr) return {};
  if (key_.empty()) return fmt::format("{}[{}]", parent_->path(), index_);
  return parent_->child_path(key_);
}

std::string Field::child_path(std::string_view key) const {
  const std::string own = path();
  return own.empty() ? std::string(key) : fmt::format("{}.{}", own, key);
}

std::string Field::describe() const {
  std::string text = value_.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return fmt::format("{} {}", value_.type_name(), text);
}

void Field::expect_object(std::initializer_list<std::string_view> known) const {
  expect_object(std::span(known.begin(), known.size()));
}

void Field::expect_object(std::span<const std::string_view> known) const {
  if (!value_.is_object()) fail("expected an object, got {}", describe());
  for (const auto& item : value_.items()) {
    const std::string& key = item.key();
    if (key.starts_with("x_")) continue; // extension keys are ignored (FORMAT.md)
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail_field(child_path(key), "unknown field (this version knows: {})", fmt::join(known, ", "));
  }
}

bool Field::has(std::string_view key) const {
  MC_ASSERT(value_.is_object());
  return value_.contains(key);
}

Field Field::operator[](std::string_view key) const {
  if (!value_.is_object()) fail("expected an object, got {}", describe());
  const auto it = value_.find(key);
  if (it == value_.end()) fail_field(child_path(key), "missing");
  return Field(*it, this, key, 0);
}

Field Field::operator[](std::size_t index) const {
  MC_ASSERT(value_.is_array());
  MC_ASSERT(index < value_.size());
  return Field(value_[index], this, {}, index);
}

std::size_t Field::array_size(std::size_t size_max) const {
  if (!value_.is_array()) fail("expected an array, got {}", describe());
  if (value_.size() > size_max) fail("{} entries, at most {}", value_.size(), size_max);
  return value_.size();
}

std::int64_t Field::integer(std::int64_t min, std::int64_t max) const {
  MC_ASSERT(min <= max);
  if (!value_.is_number_integer()) fail("expected an integer, got {}", describe());
  if (value_.is_number_unsigned() && value_.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    fail("{} is out of range {}..{}", value_.get<std::uint64_t>(), min, max);
  const auto v = value_.get<std::int64_t>();
  if (v < min || v > max) fail("{} is out of range {}..{}", v, min, max);
  return v;
}

std::int32_t Field::int32(std::int32_t min, std::int32_t max) const {
  return static_cast<std::int32_t>(integer(min, max));
}

std::uint64_t Field::uint64() const {
  if (!value_.is_number_unsigned()) fail("expected a non-negative integer, got {}", describe());
  return value_.get<std::uint64_t>();
}

bool Field::boolean() const {
  if (!value_.is_boolean()) fail("expected true or false, got {}", describe());
  return value_.get<bool>();
}

std::string Field::string(std::size_t size_max) const {
  if (!value_.is_string()) fail("expected a string, got {}", describe());
  const auto& s = value_.get_ref<const std::string&>();
  if (s.size() > size_max) fail("string of {} bytes, at most {}", s.size(), size_max);
  return s;
}

std::vector<std::int32_t> Field::int32_list(std::int32_t min, std::int32_t max,
                                            std::size_t size_max) const {
  const std::size_t size = array_size(size_max);
  std::vector<std::int32_t> out;
  out.reserve(size);
  for (std::size_t i = 0; i < size; ++i) {
    const nlohmann::json& v = value_[i];
    // Fast path for the common case (JSON parses non-negative integers as unsigned); anything
    // else goes through int32() for its message.
    if (v.is_number_integer()) {
      const std::int64_t x = v.is_number_unsigned()
                                 ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                                       v.get<std::uint64_t>(), std::uint64_t{1} << 40))
                                 : v.get<std::int64_t>();
      if (x >= min && x <= max) {
        out.push_back(static_cast<std::int32_t>(x));
        continue;
      }
    }
    out.push_back((*this)[i].int32(min, max));
  }
  return out;
}

} // namespace mc::model
