// The scenario library (scenarios/library/): every scenario replays clean on the host backend,
// and fails on each mutant its header names (a mismatch or a finding). A mutant this build
// cannot run is reported, not counted; a name the catalogue lacks is an error of the header.
#include "harness/library.h"
#include "model/errors.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

namespace mc::harness {
namespace {

// The library's files, unread: a header that cannot be read fails its own test below.
std::vector<std::string> scenario_files() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(default_library_dir()))
    if (entry.path().extension() == ".jsonl") out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

class Library : public ::testing::TestWithParam<std::string> {};

TEST_P(Library, HoldsCleanAndFailsOnItsMutants) {
  const ScenarioInfo info = read_scenario_info(GetParam());
  const LibraryResult r = run_scenario(info, ReplayOptions{});
  EXPECT_TRUE(r.clean.held()) << info.name << ": " << r.clean.summary();
  EXPECT_GT(r.clean.stats.steps, 5) << info.name;
  for (const LibraryResult::MutantRun& m : r.mutants) {
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

// A copy of library scenario `name` in `dir` whose header has `from` replaced by `to`.
std::filesystem::path edited_scenario(const std::filesystem::path& dir, const std::string& name,
                                      const std::string& from, const std::string& to) {
  std::ifstream in(default_library_dir() / (name + ".jsonl"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = text.find(from);
  EXPECT_LT(at, text.find('\n')) << from << " not in the header of " << name;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  const std::filesystem::path out = dir / (name + ".jsonl");
  std::ofstream(out) << text;
  return out;
}

std::string input_error_of(const std::filesystem::path& trace) {
  try {
    read_scenario_info(trace);
  } catch (const model::InputError& e) {
    return e.what();
  }
  return "no error";
}

// A misspelt mutant name, or one of the other level, fails where the header is read: a
// scenario must not claim to guard a mutant no replay runs.
TEST(LibraryHeader, AMutantTheCatalogueLacksIsAnError) {
  const model::testing::TempDir dir;
  const std::filesystem::path misspelt = edited_scenario(
      dir.path(), "d-temporal-natural-size", R"("kernel_mutants":["conv_one_row_short"])",
      R"("kernel_mutants":["conv_one_row_shrot"])");
  EXPECT_EQ(input_error_of(misspelt),
            misspelt.string() + ":1: source.scenario.kernel_mutants: 'conv_one_row_shrot' is no "
                                "kernel mutant of the catalogue (`mambacheck mutants` lists them)");
  EXPECT_THROW(run_library(dir.path(), ReplayOptions{}), model::InputError);
  const std::filesystem::path runner_as_kernel = edited_scenario(
      dir.path(), "a-stale-index-after-reset", R"("runner_mutants":["skip_cleanup_of_resumed"])",
      R"("runner_mutants":["conv_source_at_bias_column"])");
  EXPECT_EQ(input_error_of(runner_as_kernel),
            runner_as_kernel.string() +
                ":1: source.scenario.runner_mutants: 'conv_source_at_bias_column' is no runner "
                "mutant of the catalogue (`mambacheck mutants` lists them)");
}

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
