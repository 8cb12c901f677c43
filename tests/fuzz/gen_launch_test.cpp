// Generator sanity: every case valid per the contract (checked independently), same
// spec same bytes, referenced blocks filled, shrinking toward small cases, coverage.
#include "fuzz/gen_launch.h"

#include "contract_footprint.h"
#include "coverage.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <map>

namespace mc::fuzz {
namespace {

GenOptions without_big_offsets() {
  GenOptions o = GenOptions::host_default();
  o.weights.big_offset = 0;
  return o;
}

RC_GTEST_PROP(GenLaunch, EveryCaseIsValidPerTheContract, ()) {
  const LaunchSpec spec = *gen_launch_spec(GenOptions::host_default());
  RC_TAG(std::string(model::to_string(spec.kind)));
  const model::LaunchCase c = testing::case_without_arenas(spec);
  const std::optional<std::string> invalid = testing::find_invalidity(c);
  RC_ASSERT(!invalid.has_value());
}

RC_GTEST_PROP(GenLaunch, MaterializeIsDeterministic, ()) {
  const LaunchSpec spec = *gen_launch_spec(without_big_offsets());
  const model::LaunchCase a = materialize(spec);
  const model::LaunchCase b = materialize(spec);
  RC_ASSERT(a.arenas.size() == b.arenas.size());
  for (std::size_t i = 0; i < a.arenas.size(); ++i)
    RC_ASSERT(a.arenas[i].first_difference(b.arenas[i]) == -1);
  RC_ASSERT(a.block_tables == b.block_tables);
  RC_ASSERT(a.requests == b.requests);
}

// A referenced block holds seeded bytes, not poison: copied data differs from poison.
RC_GTEST_PROP(GenLaunch, ReferencedBlocksHoldDataAndPaddingHoldsPoison, ()) {
  const LaunchSpec spec = *gen_launch_spec(without_big_offsets());
  const model::LaunchCase c = materialize(spec);
  const model::BlockTable& t = c.block_tables.groups[0];
  const std::int32_t id = t.at(0, t.row_width - 1) >= 0 ? t.at(0, t.row_width - 1) : t.at(0, 0);
  RC_PRE(id >= 0);
  for (const model::StateTensor& s : c.layout.tensors) {
    if (s.group != 0) continue;
    const std::byte* p = c.arenas[static_cast<std::size_t>(s.arena)].data();
    const std::int64_t off = s.block_offset_bytes(id);
    std::int64_t poison_like = 0;
    for (std::int64_t i = 0; i < s.natural_bytes; ++i)
      poison_like += static_cast<std::uint8_t>(p[off + i]) == model::poison_byte(off + i);
    RC_ASSERT(poison_like < s.natural_bytes / 8 + 2);
    if (s.block_stride_bytes > s.natural_bytes &&
        c.layout.spec.groups[0].page_policy == model::PagePolicy::separate)
      RC_ASSERT(static_cast<std::uint8_t>(p[off + s.natural_bytes]) ==
                model::poison_byte(off + s.natural_bytes));
  }
}

TEST(GenLaunch, RandomLaunchSpecIsDeterministic) {
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const GenOptions o = without_big_offsets();
    EXPECT_EQ(random_launch_spec(seed, o), random_launch_spec(seed, o)) << seed;
  }
  EXPECT_NE(random_launch_spec(1, GenOptions{}), random_launch_spec(2, GenOptions{}));
}

TEST(GenLaunch, ShrinksTowardFewRequestsGroupsAndLayers) {
  GenOptions o = without_big_offsets();
  o.weights = {.tiny = 0, .small = 1, .wide_states = 0, .grid = 0, .big_offset = 0};
  int checked = 0;
  for (std::uint64_t seed = 0; seed < 200 && checked < 3; ++seed) {
    const rc::Shrinkable<LaunchSpec> s = gen_launch_spec(o)(rc::Random(seed), 100);
    const LaunchSpec& big = s.value();
    if (big.num_reqs < 6 || big.layout_spec.groups.size() < 2) continue;
    ++checked;
    const auto [small, steps] =
        rc::shrinkable::findLocalMin(s, [](const LaunchSpec& x) { return x.num_reqs >= 2; });
    SCOPED_TRACE(describe(small));
    EXPECT_GT(steps, 0u);
    EXPECT_EQ(small.num_reqs, 2);
    EXPECT_EQ(small.layout_spec.groups.size(), 1u);
    EXPECT_EQ(small.layout_spec.groups[0].num_layers, 1);
    EXPECT_EQ(small.config.num_spec_tokens, 0);
    EXPECT_EQ(small.block_tables.groups[0].row_stride, small.block_tables.groups[0].row_width);
  }
  EXPECT_EQ(checked, 3);
}

TEST(GenLaunch, DescribeNamesKindLayoutAndArrays) {
  const LaunchSpec spec = random_launch_spec(7, {.random_size = 5});
  const std::string text = describe(spec);
  EXPECT_NE(text.find(std::string(model::to_string(spec.kind))), std::string::npos) << text;
  EXPECT_NE(text.find("group 0"), std::string::npos) << text;
  EXPECT_NE(text.find("table g0=["), std::string::npos) << text;
}

// Samples specs over all sizes and demands every bug-class trigger at least a few times;
// prints the table so a run shows the distribution.
TEST(GenLaunch, CoverageOfEveryKindFamilyLayoutAndAliasing) {
  constexpr int kSamples = 3000;
  std::map<std::string, int> counts;
  for (int i = 0; i < kSamples; ++i)
    for (const std::string& f : testing::coverage_features(random_launch_spec(
             static_cast<std::uint64_t>(i) * 7919 + 1, GenOptions::host_default())))
      ++counts[f];
  std::string table;
  for (const auto& [name, n] : counts)
    table += fmt::format("  {:<28} {:>5}\n", name, n);
  std::cout << "coverage over " << kSamples << " cases:\n" << table;
  for (const std::string& f : testing::required_features())
    EXPECT_GE(counts[f], 3) << f;
}

} // namespace
} // namespace mc::fuzz
