// The kernel-level steer table (fuzz/gen_steer.h): a row for every kernel-level coverage
// feature, and each row's draw reaching its feature in a batch as short as the gate's top-up
// (10 cases at sizes 0..9, where the default draw never makes a big offset).
#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/gen_steer.h"
#include "gpu/host_backend.h"
#include "model/coverage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace mc::fuzz {
namespace {

using model::LaunchKind;

TEST(GenSteerTable, EveryKernelFeatureHasARowInCatalogueOrder) {
  std::vector<std::string_view> kernel_features;
  for (const model::CoverageFeature& f : model::coverage_catalogue())
    if (f.kernel) kernel_features.push_back(f.name);
  std::vector<std::string_view> rows;
  for (const GenSteerRow& row : gen_steer_table()) {
    rows.push_back(row.feature);
    EXPECT_FALSE(row.draw.empty()) << row.feature;
    EXPECT_NE(row.toward, nullptr) << row.feature;
  }
  EXPECT_EQ(rows, kernel_features);
  EXPECT_EQ(find_gen_steer_row("preemption"), nullptr); // an engine feature
  ASSERT_NE(find_gen_steer_row("offset-past-4GiB"), nullptr);
  EXPECT_EQ(find_gen_steer_row("offset-past-4GiB")->draw, "big-offsets");
}

// What a top-up batch of the gate draws: 10 cases from one seed, sizes 0..9.
model::Coverage batch_coverage(const GenOptions& gen, std::uint64_t seed) {
  const CampaignOptions o{.seed = seed, .cases_max = 10, .max_size = 100, .out_dir = ""};
  const CampaignReport r = run_kernel_campaign(
      o, {.gen = gen,
          .backend = [](const model::LaunchCase& c) { return gpu::run_launch_host(c); }});
  EXPECT_EQ(r.first_failing(), nullptr);
  return r.coverage;
}

TEST(GenSteerTable, EachDrawReachesItsFeatureInOneShortBatch) {
  // The default draw at these sizes never reaches big offsets: the reason the table exists.
  EXPECT_EQ(batch_coverage(GenOptions::host_default(), 200021).count("offset-past-4GiB"), 0);
  for (const GenSteerRow& row : gen_steer_table()) {
    const model::Coverage c = batch_coverage(row.toward(GenOptions::host_default()), 200021);
    EXPECT_GT(c.count(row.feature), 0) << row.feature << " not reached by its draw, " << row.draw;
  }
}

TEST(GenSteerTable, DrawsKeepTheCampaignsKinds) {
  GenOptions campaign;
  campaign.kinds = {LaunchKind::postprocess, LaunchKind::precopy, LaunchKind::postprocess_align};
  // Narrowed to the campaign's kinds that make the feature.
  EXPECT_EQ(find_gen_steer_row("skipped-row")->toward(campaign).kinds,
            (std::vector{LaunchKind::postprocess_align, LaunchKind::precopy}));
  EXPECT_EQ(find_gen_steer_row("launch-precopy")->toward(campaign).kinds,
            (std::vector{LaunchKind::precopy}));
  // None of them makes it: the campaign's kinds stay (no kind its kernels may lack).
  EXPECT_EQ(find_gen_steer_row("slot-table-row")->toward(campaign).kinds, campaign.kinds);
  // Other draws leave the kinds alone.
  const GenOptions big = find_gen_steer_row("offset-past-4GiB")->toward(campaign);
  EXPECT_EQ(big.kinds, campaign.kinds);
  EXPECT_EQ(big.weights.tiny, 0);
  EXPECT_GT(big.weights.big_offset, 0);
  // An empty list is every kind: narrowed to the ones that make the feature.
  for (const LaunchKind k : find_gen_steer_row("slot-table-row")->toward(GenOptions{}).kinds)
    EXPECT_TRUE(model::tables_by_slot(k)) << model::to_string(k);
}

} // namespace
} // namespace mc::fuzz
