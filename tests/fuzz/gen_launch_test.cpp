// Generator sanity: every case valid per the contract (checked independently), same
// spec same bytes, referenced blocks filled, shrinking toward small cases, coverage.
#include "fuzz/gen_launch.h"
#include "model/prng.h"

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

// Every referenced block holds exactly the seeded bytes materialize() promises (SplitMix64
// words seeded by (fill_seed, tensor, block), little-endian), and the page padding right
// after a tensor's natural bytes still holds poison. Exact: an unfilled byte, a byte
// filled for another block or tensor, or a fill that spills into the padding shows.
RC_GTEST_PROP(GenLaunch, ReferencedBlocksHoldDataAndPaddingHoldsPoison, ()) {
  const LaunchSpec spec = *gen_launch_spec(without_big_offsets());
  const model::LaunchCase c = materialize(spec);
  std::int64_t checked = 0;
  for (std::size_t ti = 0; ti < c.layout.tensors.size(); ++ti) {
    const model::StateTensor& s = c.layout.tensors[ti];
    const model::BlockTable& t = c.block_tables.groups[static_cast<std::size_t>(s.group)];
    const std::byte* p = c.arenas[static_cast<std::size_t>(s.arena)].data();
    for (std::int32_t r = 0; r < t.num_rows; ++r)
      for (std::int32_t col = 0; col < t.row_width; ++col) {
        const std::int32_t id = t.at(r, col);
        if (id < 0 || id >= spec.layout_spec.num_blocks) continue;
        const std::int64_t off = s.block_offset_bytes(id);
        model::SplitMix64 rng{model::mix_seed(spec.fill_seed, ti, static_cast<std::uint64_t>(id))};
        std::uint64_t word = 0;
        for (std::int64_t i = 0; i < s.natural_bytes; ++i) {
          if (i % 8 == 0) word = rng.next();
          const auto expected = static_cast<std::uint8_t>(word >> (8 * (i % 8)));
          if (static_cast<std::uint8_t>(p[off + i]) != expected)
            RC_FAIL(fmt::format("tensor {} block {} byte {}: {} != seeded {}", ti, id, i,
                                static_cast<int>(p[off + i]), static_cast<int>(expected)));
        }
        if (s.block_stride_bytes > s.natural_bytes &&
            c.layout.spec.groups[static_cast<std::size_t>(s.group)].page_policy ==
                model::PagePolicy::separate)
          RC_ASSERT(static_cast<std::uint8_t>(p[off + s.natural_bytes]) ==
                    model::poison_byte(off + s.natural_bytes));
        ++checked;
      }
  }
  RC_PRE(checked > 0); // a case whose tables reference no block says nothing here
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

// GenOptions::races() (race hunting on the GPU), over the first 200 seeds: every case a
// valid production grid of 256..512 requests whose every request has >= 128 state tensors (so its
// copy is split over >= 128 work units, many CTAs); every mapped row of a postprocess kind
// crosses a block, and >= 45% of them, in every such case, are a same-column reset with a
// same-block shift (the row whose programs race on num_accepted); postprocess_align is the
// most frequent kind. Exact counts over the same seeds are printed.
TEST(GenLaunch, RacesDrawsGridsWhereEveryRequestIsCopiedByManyPrograms) {
  constexpr std::uint64_t kSeeds = 200;
  const GenOptions o = GenOptions::races();
  std::map<model::LaunchKind, int> kinds;
  std::int64_t save_rows = 0;
  std::int64_t shift_rows = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    const LaunchSpec spec = random_launch_spec(seed, o);
    SCOPED_TRACE(fmt::format("seed {}", seed));
    ++kinds[spec.kind];
    EXPECT_EQ(spec.size_class, SizeClass::grid);
    EXPECT_GE(spec.num_reqs, 256);
    EXPECT_LE(spec.num_reqs, 512);
    EXPECT_GE(spec.config.num_spec_tokens, 1);
    const model::LaunchCase c = testing::case_without_arenas(spec);
    EXPECT_GE(c.layout.tensors.size(), 128u);
    const std::optional<std::string> invalid = testing::find_invalidity(c);
    EXPECT_FALSE(invalid.has_value()) << *invalid;
    if (spec.kind != model::LaunchKind::postprocess &&
        spec.kind != model::LaunchKind::postprocess_align)
      continue;
    const testing::Footprint f = testing::contract_footprint(c);
    EXPECT_EQ(f.steady_rows, 0);
    EXPECT_GT(f.crossing_rows, 0);
    std::int64_t shifts = 0;
    for (const testing::PlannedCopy& copy : f.copies)
      shifts += copy.src_col == copy.dst_col && copy.bias > 0 ? 1 : 0;
    EXPECT_GE(shifts * 100, std::int64_t{45} * f.crossing_rows)
        << shifts << " of " << f.crossing_rows;
    save_rows += f.crossing_rows;
    shift_rows += shifts;
  }
  for (const auto& [kind, n] : kinds) {
    if (kind != model::LaunchKind::postprocess_align) {
      EXPECT_GT(kinds[model::LaunchKind::postprocess_align], n) << model::to_string(kind);
    }
  }
  std::cout << fmt::format("races: {} of {} cases postprocess_align; {} of {} save rows a "
                           "same-column shift\n",
                           kinds[model::LaunchKind::postprocess_align], kSeeds, shift_rows,
                           save_rows);
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
