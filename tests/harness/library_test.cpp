// The scenario library (scenarios/library/): every scenario replays clean on the host backend,
// and fails on each mutant its header names (a mismatch or a finding). A mutant name this build
// does not know (or cannot run) is reported, not counted: the pairs are added as mutants land.
#include "harness/library.h"

#include <gtest/gtest.h>

#include <set>

namespace mc::harness {
namespace {

std::vector<std::string> scenario_files() {
  std::vector<std::string> out;
  for (const ScenarioInfo& info : list_library(default_library_dir()))
    out.push_back(info.path.string());
  return out;
}

class Library : public ::testing::TestWithParam<std::string> {};

TEST_P(Library, HoldsCleanAndFailsOnItsMutants) {
  const ScenarioInfo info = read_scenario_info(GetParam());
  const LibraryResult r = run_scenario(info, ReplayOptions{});
  EXPECT_TRUE(r.clean.held()) << info.name << ": " << r.clean.summary();
  EXPECT_GT(r.clean.stats.steps, 5) << info.name;
  for (const LibraryResult::MutantRun& m : r.mutants) {
    if (!m.known) {
      std::printf("%s: %s not run (%s)\n", info.name.c_str(), m.mutant.c_str(),
                  m.summary.empty() ? "not in this build's catalogue" : m.summary.c_str());
      continue;
    }
    EXPECT_TRUE(m.caught) << info.name << " must fail on " << m.mutant << " but held";
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Library, ::testing::ValuesIn(scenario_files()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = std::filesystem::path(p.param).stem().string();
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// One scenario per bug class the model can express; each names at least one mutant.
TEST(LibraryCoverage, EveryClassHasAScenarioWithAMutant) {
  std::set<char> classes;
  for (const ScenarioInfo& info : list_library(default_library_dir())) {
    classes.insert(info.bug_class);
    EXPECT_FALSE(info.guards.empty()) << info.name;
  }
  for (const char c : {'A', 'C', 'D', 'E', 'G', 'H'})
    EXPECT_TRUE(classes.contains(c)) << "no scenario of class " << c;
}

} // namespace
} // namespace mc::harness
