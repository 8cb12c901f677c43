// A JSON value together with its path ("scheduled[2].token_ids"), so that every rejection of
// an input file names the field: the one reader of trace lines (scenarios/FORMAT.md, "Errors")
// and of case files (CASE_FORMAT.md). The path is kept as a chain of parents and spelt out
// only when a field is rejected: reading stays allocation-light.
//
// Field throws FieldError, which carries the path and the reason apart; the reader of a file
// adds where it was in front ("FILE:LINE: field: reason" for a trace, "FILE: field: reason"
// for a case) and turns it into the project's InputError. expect_object makes an object
// closed: a key the format does not list is rejected unless it starts with "x_" (FORMAT.md,
// "Unknown fields", says why).
#pragma once

#include "model/errors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

// A rejected field: `field` is its path within the line, `reason` says what is wrong.
struct FieldError : std::runtime_error {
  FieldError(std::string field_path, std::string why)
      : std::runtime_error(field_path + ": " + why), field(std::move(field_path)),
        reason(std::move(why)) {}
  std::string field;
  std::string reason;
};

template <typename... Args>
[[noreturn]] void fail_field(std::string field, fmt::format_string<Args...> format,
                             Args&&... args) {
  throw FieldError(std::move(field), fmt::format(format, std::forward<Args>(args)...));
}

// What a text that parse_json_text reads is: one line of a JSON Lines file (a position in it is
// a column) or a whole file (a line and a column).
enum class JsonText : std::uint8_t { line, file };

// Parses `text` as exactly one JSON value. What the text gets wrong is a FieldError in the
// project's words, never the parser's own text: a NUL byte, a syntax error or anything after the
// value (with the line and column, or the column of a line), a number too large for a double.
// The field is the path of the value being read when it failed ("scheduled[0].num_tokens"), or
// "json" when the failure is outside any value. `callback` (may be empty) is handed to the
// parser (a depth limit).
nlohmann::json parse_json_text(std::string_view text, JsonText kind,
                               const nlohmann::json::parser_callback_t& callback = nullptr);

class Field {
public:
  // The root of a line: an empty path.
  explicit Field(const nlohmann::json& value) : value_(value) {}

  const nlohmann::json& value() const { return value_; }
  // Built on demand (only a rejection needs it): "scheduled[2].token_ids".
  std::string path() const;

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    fail_field(path(), format, std::forward<Args>(args)...);
  }

  // Asserts an object whose keys are all in `known` (or start with "x_").
  void expect_object(std::initializer_list<std::string_view> known) const;
  void expect_object(std::span<const std::string_view> known) const;
  bool has(std::string_view key) const;         // asserts an object
  Field operator[](std::string_view key) const; // a missing key is rejected
  Field operator[](std::size_t index) const;    // asserts index < size
  std::size_t array_size(std::size_t size_max) const;

  std::int64_t integer(std::int64_t min, std::int64_t max) const;
  std::int32_t int32(std::int32_t min = INT32_MIN, std::int32_t max = INT32_MAX) const;
  std::uint64_t uint64() const;
  bool boolean() const;
  std::string string(std::size_t size_max) const;
  // Runs `parse` (an enum parser of model/ that throws InputError) on the string and names
  // this field when it throws.
  template <typename Parse> auto parse_with(Parse parse, std::size_t size_max = 64) const {
    const std::string text = string(size_max);
    try {
      return parse(text);
    } catch (const InputError& e) {
      fail("{}", e.what());
    }
  }
  // A list of integers in min..max, at most size_max of them.
  std::vector<std::int32_t> int32_list(std::int32_t min, std::int32_t max,
                                       std::size_t size_max) const;

private:
  // A child refers to its parent, which outlives it (children are temporaries or locals of
  // a callee), and to a key owned by the JSON value or a literal.
  Field(const nlohmann::json& value, const Field* parent, std::string_view key, std::size_t index)
      : value_(value), parent_(parent), key_(key), index_(index) {}

  std::string describe() const; // type and a short excerpt, for messages
  std::string child_path(std::string_view key) const;

  const nlohmann::json& value_;
  const Field* parent_ = nullptr;
  std::string_view key_; // empty: this is element index_ of the parent
  std::size_t index_ = 0;
};

} // namespace mc::model
