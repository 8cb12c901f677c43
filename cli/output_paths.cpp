// Output paths checked up front and written atomically (output_paths.h).
#include "cli/output_paths.h"

#include "model/errors.h"
#include "model/output_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <unistd.h>

namespace mc::cli {
namespace {

namespace fs = std::filesystem;

fs::path directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

} // namespace

void check_output_file(std::string_view option, const std::string& path) {
  if (path.empty()) return;
  // A device or a FIFO (/dev/stdout, /dev/full) is written in place: only it must be writable,
  // not the directory that holds it.
  if (model::is_special_file(path)) {
    if (::access(path.c_str(), W_OK) != 0)
      model::fail_input("{}: cannot write '{}': {}", option, path, std::strerror(errno));
    return;
  }
  std::error_code ec;
  const fs::path dir = directory_of(path);
  if (!fs::is_directory(dir, ec))
    model::fail_input("{}: cannot write '{}': {} is not a directory", option, path,
                      fs::exists(dir, ec) ? fmt::format("'{}'", dir.string())
                                          : fmt::format("'{}' does not exist, so it", dir.string()));
  if (fs::is_directory(path, ec))
    model::fail_input("{}: cannot write '{}': it is a directory", option, path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    model::fail_input("{}: cannot write '{}': {}", option, path, std::strerror(errno));
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    model::fail_input("{}: cannot write '{}': {}", option, path, std::strerror(errno));
}

void create_output_dir(std::string_view option, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  fs::path existing = fs::absolute(path, ec);
  if (ec) model::fail_input("{}: cannot use '{}': {}", option, path, ec.message());
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing)
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    model::fail_input("{}: cannot create '{}': '{}' is not a directory", option, path,
                      existing.string());
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    model::fail_input("{}: cannot create '{}': '{}': {}", option, path, existing.string(),
                      std::strerror(errno));
  fs::create_directories(path, ec);
  if (ec) model::fail_input("{}: cannot create '{}': {}", option, path, ec.message());
}

void write_file_atomically(std::string_view option, const std::string& path,
                           std::string_view content) {
  check_output_file(option, path);
  model::write_whole_file(path, content, option);
}

void write_json_file(std::string_view option, const std::string& path,
                     const nlohmann::json& report) {
  if (!path.empty()) write_file_atomically(option, path, report.dump(2) + "\n");
}

} // namespace mc::cli
