// The coverage catalogue, its requirement parsing and its report forms (model/coverage.h).
#include "model/coverage.h"

#include "model/errors.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace mc::model {
namespace {

using F = CoverageFeatureId;

// The launch kinds and row features are kernel-level coverage features of the same names.
TEST(Coverage, LaunchKindsAndRowFeaturesMapToTheirNames) {
  for (const LaunchKind k : kAllLaunchKinds) {
    EXPECT_EQ(coverage_feature(k).name, fmt::format("launch-{}", to_string(k)));
    EXPECT_TRUE(coverage_feature(k).kernel);
  }
  for (std::size_t i = 0; i < kRowFeatureCount; ++i) {
    const auto row = static_cast<RowFeature>(i);
    EXPECT_EQ(coverage_feature(row).name, to_string(row));
    EXPECT_TRUE(coverage_feature(row).kernel);
  }
}

TEST(Coverage, RequirementParsesNamesListsAllAndNone) {
  const CoverageRequirement r =
      parse_coverage_requirement({"preemption,reset", "preemption", "none"});
  EXPECT_FALSE(r.all);
  EXPECT_EQ(r.features, (std::vector<std::string>{"preemption", "reset"}));
  EXPECT_TRUE(parse_coverage_requirement({"all"}).all);
  EXPECT_TRUE(parse_coverage_requirement({"none"}).empty());
}

TEST(Coverage, UnknownFeatureIsOneLineListingTheValidOnes) {
  try {
    parse_coverage_requirement({"preemption,preemptoin"});
    FAIL() << "accepted an unknown feature";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'preemptoin'"), std::string::npos) << what;
    EXPECT_NE(what.find("v2-slot-reuse"), std::string::npos) << what;
    EXPECT_NE(what.find("offset-past-4GiB"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Coverage, AFeatureOfALevelThatDoesNotRunIsBadInput) {
  const CoverageRequirement r = parse_coverage_requirement({"preemption"});
  const CoverageLevel kernel[] = {CoverageLevel::kernel};
  const CoverageLevel both[] = {CoverageLevel::kernel, CoverageLevel::engine};
  EXPECT_THROW(check_requirement_levels(r, kernel), InputError);
  EXPECT_NO_THROW(check_requirement_levels(r, both));
}

TEST(Coverage, MissingListsRequiredFeaturesNeverReachedOfTheLevel) {
  Coverage c = Coverage::empty(CoverageLevel::engine);
  c.add(F::preemption, 3);
  c.add(F::reset);
  EXPECT_EQ(missing_coverage(parse_coverage_requirement({"preemption,reset"}), c),
            std::vector<std::string>{});
  EXPECT_EQ(missing_coverage(parse_coverage_requirement({"reset,abort"}), c),
            std::vector<std::string>{"abort"});
  // A kernel-only feature does not bind the engine level's counts.
  EXPECT_EQ(missing_coverage(parse_coverage_requirement({"skipped-row"}), c),
            std::vector<std::string>{});
  const std::vector<std::string> all = missing_coverage({.all = true}, c);
  EXPECT_EQ(static_cast<std::int64_t>(all.size()), c.features() - 2);
  EXPECT_EQ(c.reached(), 2);
}

TEST(Coverage, JsonRoundTripsAndTheTableMarksWhatWasNeverReached) {
  Coverage c = Coverage::empty(CoverageLevel::engine);
  c.add(F::v2_slot_reuse, 7);
  c.decode_crossings_by_accepted[3] = 2;
  const Coverage back = coverage_from_json(to_json(c));
  EXPECT_EQ(back.counts, c.counts);
  EXPECT_EQ(back.decode_crossings_by_accepted, c.decode_crossings_by_accepted);
  EXPECT_EQ(to_json(c)["counts"]["v2-slot-reuse"], 7);
  EXPECT_EQ(to_json(c)["counts"]["abort"], 0); // every feature of the level is listed
  const std::string table = coverage_table(c);
  EXPECT_NE(table.find("1 of"), std::string::npos) << table;
  EXPECT_NE(table.find("NEVER"), std::string::npos) << table;
  EXPECT_NE(table.find("never reached: "), std::string::npos) << table;
  EXPECT_NE(table.find("a=3:2"), std::string::npos) << table;
}

TEST(Coverage, MergeAddsCounts) {
  Coverage a = Coverage::empty(CoverageLevel::kernel);
  Coverage b = Coverage::empty(CoverageLevel::kernel);
  a.add(F::ds_bias, 2);
  b.add(F::ds_bias, 3);
  b.add(F::launch_precopy);
  a.merge(b);
  EXPECT_EQ(a.count(F::ds_bias), 5);
  EXPECT_EQ(a.count(F::launch_precopy), 1);
}

} // namespace
} // namespace mc::model
