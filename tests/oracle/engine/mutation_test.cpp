// Two deliberate rule breaks, each selectable as a runner option, must be caught by an
// invariant whose message points at the broken rule (REFERENCE.md 5, class A).
#include "model/presets.h"
#include "oracle/engine/driver.h"

#include <gtest/gtest.h>

namespace mc::oracle::engine {
namespace {

EngineReport run_tiny(model::RunnerFlavour flavour, const Mutations& mutations,
                      std::int32_t resets_per_million, std::uint64_t seed) {
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  model::CacheConfig config = preset.config;
  model::LayoutSpec spec = preset.spec;
  spec.num_blocks = 24;
  EngineOptions options;
  options.runner.flavour = flavour;
  options.runner.mutations = mutations;
  options.scheduler.reset_prefix_cache_per_million = resets_per_million;
  return run_engine(config, spec, 3000, 200, seed, options);
}

// #35157: a request force-preempted by reset_prefix_cache comes back only among the resumed;
// if cleanup skips the resumed ids its stale column is used as a copy source.
TEST(EngineMutation, SkippingCleanupOfResumedIsCaught) {
  const EngineReport clean = run_tiny(model::RunnerFlavour::v1, {}, 20'000, 7);
  ASSERT_FALSE(clean.first_finding.has_value()) << clean.first_finding->message;
  ASSERT_GT(clean.resets, 0);
  const EngineReport broken =
      run_tiny(model::RunnerFlavour::v1, {.skip_cleanup_of_resumed = true}, 20'000, 7);
  ASSERT_TRUE(broken.first_finding.has_value());
  const Finding& f = *broken.first_finding;
  EXPECT_EQ(f.kind, FindingKind::wrong_copy_source) << f.message;
  EXPECT_NE(f.message.find("survived cleanup although the request was resumed"), std::string::npos)
      << f.message;
}

// #53142: V2 seeded a new request's column with the attention block size (2 in the tiny
// presets) instead of the mamba block size (4); only a prefix hit makes the seed matter.
TEST(EngineMutation, SeedingV2WithAttentionBlockSizeIsCaught) {
  const EngineReport clean = run_tiny(model::RunnerFlavour::v2, {}, 0, 11);
  ASSERT_FALSE(clean.first_finding.has_value()) << clean.first_finding->message;
  ASSERT_GT(clean.prefix_hits, 0);
  const EngineReport broken =
      run_tiny(model::RunnerFlavour::v2, {.v2_seed_with_attn_block_size = true}, 0, 11);
  ASSERT_TRUE(broken.first_finding.has_value());
  const Finding& f = *broken.first_finding;
  EXPECT_EQ(f.kind, FindingKind::wrong_copy_source) << f.message;
  EXPECT_NE(f.message.find("was seeded this step as"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("// 2 ="), std::string::npos) << f.message; // the divisor used
}

} // namespace
} // namespace mc::oracle::engine
