#include "harness/data_dir.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <system_error>

// MC_DATA_FROM_BIN: the data directory relative to the binary's directory, from the install
// directories configured (../share/mambacheck by default); MC_SOURCE_DIR: the source tree.
// Both are defined for this file only (harness/CMakeLists.txt), so no other object file
// changes with the place the tree was built in.
namespace mc::harness {
namespace {

std::filesystem::path own_binary() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe;
}

} // namespace

DataPlaces data_places(const std::filesystem::path& relative) {
  DataPlaces places{.source = std::filesystem::path(MC_SOURCE_DIR) / relative};
  const std::filesystem::path exe = own_binary();
  if (!exe.empty())
    places.installed = (exe.parent_path() / MC_DATA_FROM_BIN / relative).lexically_normal();
  return places;
}

std::filesystem::path find_data_dir(const std::filesystem::path& relative, std::string_view what) {
  const DataPlaces places = data_places(relative);
  std::error_code ec;
  if (!places.installed.empty() && std::filesystem::is_directory(places.installed, ec))
    return places.installed;
  if (std::filesystem::is_directory(places.source, ec)) return places.source;
  const std::string installed =
      places.installed.empty()
          ? std::string("(the binary's own path, /proc/self/exe, is unreadable)")
          : places.installed.string();
  throw model::EnvironmentError(fmt::format(
      "no {}: not installed next to this binary ({}) and not in the source tree it was built "
      "from ({})",
      what, installed, places.source.string()));
}

} // namespace mc::harness
