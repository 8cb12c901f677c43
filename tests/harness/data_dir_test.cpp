// Where the binary's shipped data is found (harness/data_dir.h): next to the binary first, then
// the source tree, and an error naming both when neither has it. The test binary lives in the
// build tree, so "installed" is BUILD/tests/share/mambacheck/... (the configured
// ../share/mambacheck from its directory), which the tests create under a name of their own.
#include "harness/data_dir.h"

#include "model/errors.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace mc::harness {
namespace {

namespace fs = std::filesystem;

fs::path own_directory() {
  return fs::read_symlink("/proc/self/exe").parent_path();
}

// A relative path no other test uses, so tests running at once do not see each other's.
std::string unique_relative(const char* what) {
  return std::string("scenarios/data-dir-test-") + what + "-" + std::to_string(::getpid());
}

TEST(DataDir, PlacesAreNextToTheBinaryAndInTheSourceTree) {
  const DataPlaces places = data_places("scenarios/library");
  EXPECT_EQ(places.installed,
            (own_directory() / MC_DATA_FROM_BIN / "scenarios/library").lexically_normal());
  EXPECT_EQ(places.source, fs::path(MC_SOURCE_DIR) / "scenarios/library");
}

TEST(DataDir, InstalledComesFirst) {
  // model/examples is in the source tree too: the copy next to the binary wins. No other test
  // looks this path up, so creating it does not disturb tests running at once.
  const DataPlaces places = data_places("model/examples");
  ASSERT_TRUE(fs::is_directory(places.source));
  fs::create_directories(places.installed);
  EXPECT_EQ(find_data_dir("model/examples", "probe"), places.installed);
  fs::remove_all(places.installed);
  EXPECT_EQ(find_data_dir("model/examples", "probe"), places.source);
}

TEST(DataDir, InstalledOnly) {
  const std::string relative = unique_relative("installed");
  const fs::path installed = data_places(relative).installed;
  fs::create_directories(installed);
  EXPECT_EQ(find_data_dir(relative, "probe"), installed);
  fs::remove_all(installed);
}

TEST(DataDir, SourceTreeWhenNothingIsInstalled) {
  // scenarios/examples ships in the source tree and nothing installs it next to a test binary.
  ASSERT_FALSE(fs::exists(data_places("scenarios/examples").installed));
  EXPECT_EQ(find_data_dir("scenarios/examples", "examples"),
            fs::path(MC_SOURCE_DIR) / "scenarios/examples");
}

TEST(DataDir, NeitherNamesBothPlaces) {
  const std::string relative = unique_relative("absent");
  const DataPlaces places = data_places(relative);
  try {
    find_data_dir(relative, "probe data");
    FAIL() << "found " << relative;
  } catch (const model::EnvironmentError& e) {
    EXPECT_EQ(std::string(e.what()), "no probe data: not installed next to this binary (" +
                                         places.installed.string() +
                                         ") and not in the source tree it was built from (" +
                                         places.source.string() + ")");
  }
}

} // namespace
} // namespace mc::harness
