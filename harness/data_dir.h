// Where the data this program ships with is found at run time: the scenario library, the
// example scenarios and workloads. Two places, in this order:
//   installed   next to the binary, as `cmake --install` lays it out: BIN/../share/mambacheck/
//               (the binary's own path from /proc/self/exe, so a symlink to it works too);
//   source      the source tree the binary was built from (a binary run from its build tree).
// A path is named as it is in the source tree ("scenarios/library"); installed, the same path
// lies under share/mambacheck/.
#pragma once

#include <filesystem>
#include <string_view>

namespace mc::harness {

struct DataPlaces {
  std::filesystem::path installed; // empty when the binary's own path cannot be read
  std::filesystem::path source;
};

// The two places `relative` is looked for (neither need exist).
DataPlaces data_places(const std::filesystem::path& relative);

// The first of data_places(relative) that is a directory. Throws EnvironmentError naming
// `what` and both places when neither is.
std::filesystem::path find_data_dir(const std::filesystem::path& relative, std::string_view what);

} // namespace mc::harness
