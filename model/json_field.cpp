// Field: typed access to one JSON value of an input file, with its path in every error.
#include "model/json_field.h"

#include "model/errors.h"

#include <algorithm>

namespace mc::model {

std::string Field::path() const {
  if (parent_ == nullptr) return {};
  std::string parent = parent_->path();
  if (key_.empty()) return fmt::format("{}[{}]", parent, index_);
  return parent.empty() ? std::string(key_) : fmt::format("{}.{}", parent, key_);
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
