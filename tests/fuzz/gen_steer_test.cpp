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

using F = model::CoverageFeatureId;
using model::LaunchKind;

TEST(GenSteerTable, KernelFeaturesHaveADraw) {
  EXPECT_EQ(gen_steer_row(F::preemption), nullptr); // an engine feature
  ASSERT_NE(gen_steer_row(F::offset_past_4GiB), nullptr);
  EXPECT_EQ(gen_steer_row(F::offset_past_4GiB)->draw, "big-offsets");
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
  EXPECT_EQ(batch_coverage(GenOptions::host_default(), 200021).count(F::offset_past_4GiB), 0);
  for (const model::CoverageFeature& f : model::coverage_catalogue()) {
    const GenSteerRow* row = gen_steer_row(f.id);
    if (row == nullptr) continue;
    const model::Coverage c = batch_coverage(row->toward(GenOptions::host_default()), 200021);
    EXPECT_GT(c.count(f.id), 0) << f.name << " not reached by its draw, " << row->draw;
  }
}

TEST(GenSteerTable, DrawsKeepTheCampaignsKinds) {
  GenOptions campaign;
  campaign.kinds = {LaunchKind::postprocess, LaunchKind::precopy, LaunchKind::postprocess_align};
  // Narrowed to the campaign's kinds that make the feature.
  EXPECT_EQ(gen_steer_row(F::skipped_row)->toward(campaign).kinds,
            (std::vector{LaunchKind::postprocess_align, LaunchKind::precopy}));
  EXPECT_EQ(gen_steer_row(F::launch_precopy)->toward(campaign).kinds,
            (std::vector{LaunchKind::precopy}));
  // None of them makes it: the campaign's kinds stay (no kind its kernels may lack).
  EXPECT_EQ(gen_steer_row(F::slot_table_row)->toward(campaign).kinds, campaign.kinds);
  // Other draws leave the kinds alone.
  const GenOptions big = gen_steer_row(F::offset_past_4GiB)->toward(campaign);
  EXPECT_EQ(big.kinds, campaign.kinds);
  EXPECT_EQ(big.weights.tiny, 0);
  EXPECT_GT(big.weights.big_offset, 0);
  // An empty list is every kind: narrowed to the ones that make the feature.
  for (const LaunchKind k : gen_steer_row(F::slot_table_row)->toward(GenOptions{}).kinds)
    EXPECT_TRUE(model::tables_by_slot(k)) << model::to_string(k);
}

} // namespace
} // namespace mc::fuzz
