// Findings: the rerun tally and its classification, the signature key and --skip-signature
// matching, and the shrinker under a backend that fails at random: it never saves a case
// that did not reproduce.
#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/campaign/kernel_shrink.h"
#include "fuzz/campaign/kernel_signature.h"
#include "fuzz/findings.h"
#include "gpu/host_backend.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <random>

namespace mc::fuzz {
namespace {

// Kernel-level coverage counts launches and rows from the oracle's results: the same seed gives
// the same counts, in this process or in forked children.
TEST(KernelCoverage, SameSeedSameCountsIsolatedOrNot) {
  CampaignOptions o{.seed = 5, .cases_max = 60, .max_size = 35, .out_dir = ""};
  const KernelLevelOptions k{
      .backend = [](const model::LaunchCase& c) { return gpu::run_launch_host(c); }};
  const CampaignReport here = run_kernel_campaign(o, k);
  o.isolate = true;
  const CampaignReport isolated = run_kernel_campaign(o, k);
  ASSERT_EQ(here.first_failing(), nullptr);
  EXPECT_EQ(here.coverage.counts, isolated.coverage.counts);
  std::int64_t launches = 0;
  for (const auto& [kind, n] : here.cases_by.at("kind")) {
    EXPECT_EQ(here.coverage.count("launch-" + kind), n) << kind;
    launches += n;
  }
  EXPECT_EQ(launches, 60);
  EXPECT_EQ(here.coverage.count("same-block-shift"), 50);
  EXPECT_EQ(here.coverage.count("skipped-row"), 22);
  EXPECT_EQ(here.coverage.count("ds-bias"), 19);
}

TEST(RunTally, EveryRunTheSameFailureIsDeterministic) {
  RunTally t;
  for (int i = 0; i < 6; ++i)
    t.add(std::string("arena 0 bytes [8, 16) differ"), false);
  EXPECT_EQ(t.classify(), Classification::deterministic);
  EXPECT_EQ(t.summary(), "failed 6 of 6 runs");
  EXPECT_EQ(candidate_runs(t), 1);
}

TEST(RunTally, SomeRunsHeldIsNondeterministic) {
  RunTally t;
  t.add(std::string("x"), false);
  for (int i = 0; i < 5; ++i)
    t.add(std::nullopt, false);
  EXPECT_EQ(t.classify(), Classification::nondeterministic);
  EXPECT_EQ(t.summary(), "failed 1 of 6 runs");
  EXPECT_EQ(t.run_failures, (std::vector<std::string>{"x", "", "", "", "", ""}));
  // (5/6)^r < 0.05 first at r = 17.
  EXPECT_EQ(candidate_runs(t), 17);
}

TEST(RunTally, DifferentBytesInDifferentRunsIsNondeterministic) {
  RunTally t;
  t.add(std::string("arena 0 bytes [8, 16) differ"), false);
  t.add(std::string("arena 0 bytes [24, 32) differ"), false);
  EXPECT_EQ(t.failed, 2);
  EXPECT_EQ(t.classify(), Classification::nondeterministic);
  EXPECT_EQ(candidate_runs(t), 1);
}

TEST(RunTally, ABackendErrorInAnyRunIsABackendError) {
  RunTally t;
  t.add(std::string("arena 0 bytes [8, 16) differ"), false);
  t.add(std::string("the backend failed: killed by SIGSEGV"), true);
  EXPECT_EQ(t.classify(), Classification::backend_error);
}

TEST(Reproducible, AtLeastHalfOfTheRerunsAndNeverNone) {
  EXPECT_TRUE(reproducible(3, 5));
  EXPECT_FALSE(reproducible(2, 5));
  EXPECT_TRUE(reproducible(1, 1));
  EXPECT_FALSE(reproducible(0, 1));
  EXPECT_TRUE(reproducible(2, 4));
}

TEST(Signature, KeyLeavesTheClassificationOutAndSkipMatchesEitherForm) {
  const Signature s{.level = "kernel",
                    .kind = "postprocess_align",
                    .difference = "state-bytes",
                    .shape = "same-block-shift",
                    .features = {"resets-accepted", "same-block-shift"},
                    .classification = Classification::nondeterministic};
  EXPECT_EQ(s.key(), "kernel:postprocess_align:state-bytes:same-block-shift");
  EXPECT_EQ(s.to_string(), "kernel:postprocess_align:nondeterministic:state-bytes:same-block-shift");
  EXPECT_TRUE(signature_matches(s, s.key()));
  EXPECT_TRUE(signature_matches(s, s.to_string()));
  EXPECT_TRUE(
      signature_matches(s, "kernel:postprocess_align:deterministic:state-bytes:same-block-shift"));
  EXPECT_FALSE(signature_matches(s, "kernel:precopy:state-bytes:same-block-shift"));
  EXPECT_FALSE(signature_matches(s, "kernel:postprocess_align"));
}

TEST(Signature, ShapeIsTheMostTellingFeature) {
  EXPECT_EQ(shape_of({"copy", "resets-accepted", "same-block-shift"}), "same-block-shift");
  EXPECT_EQ(shape_of({"copy", "offset-past-4GiB"}), "offset-past-4GiB");
  EXPECT_EQ(shape_of({"no-copy"}), "no-copy");
  EXPECT_EQ(shape_of({}), "-");
}

// A small valid spec with `rows` batch rows, drawn by the generator at a fixed seed.
rc::Shrinkable<LaunchSpec> drawn_spec(std::uint64_t seed) {
  GenOptions gen = GenOptions::host_default();
  return gen_launch_spec(gen)(rc::Random(seed), 30);
}

// The shrinker under a backend whose failures are noise: each run of any case fails with
// probability p (the signature of every failure is the same). Whatever it accepts, the case
// it saves either failed in at least half of its reruns or is the original, and it never
// carries a tally without a failure.
RC_GTEST_PROP(ShrinkUnderNoise, NeverSavesACaseThatDidNotReproduce, ()) {
  const double p = *rc::gen::element(0.05, 0.2, 0.5, 0.8, 1.0);
  const int reruns = *rc::gen::inRange(1, 8);
  const auto seed = *rc::gen::inRange<std::uint64_t>(1, 1000);
  std::mt19937_64 noise(seed * 7919);
  std::bernoulli_distribution fails(p);
  const Signature sig{.level = "kernel", .kind = "precopy", .difference = "state-bytes",
                      .shape = "copy"};
  int runs = 0;
  const CaseJudge judge = [&](const LaunchSpec&) {
    ++runs;
    CaseVerdict v;
    if (fails(noise)) {
      v.failure = "arena 0 bytes [0, 8) differ";
      v.signature = sig;
    }
    return v;
  };
  const rc::Shrinkable<LaunchSpec> original = drawn_spec(seed);
  RunTally first;
  first.add(std::string("arena 0 bytes [0, 8) differ"), false); // the run that found it
  for (int i = 0; i < reruns; ++i)
    first.add(judge(original.value()).failure, false);
  const ShrinkOutcome out = shrink_finding(original, first, sig.key(), judge, reruns,
                                           ShrinkLimits{.candidates_max = 60, .seconds_max = 30});
  RC_ASSERT(out.saved_runs.failed > 0);
  if (out.kept) {
    RC_ASSERT(out.saved_runs.runs == reruns);
    RC_ASSERT(reproducible(out.saved_runs.failed, out.saved_runs.runs));
  } else {
    RC_ASSERT(out.spec == original.value());
    RC_ASSERT(out.saved_runs.runs == first.runs);
  }
  RC_ASSERT(out.tried <= 60 + 1);
}

// A backend that never fails again after the first run: nothing smaller is kept, the
// original is saved with its own tally.
TEST(ShrinkUnderNoise, AFailureThatNeverRecursKeepsTheOriginal) {
  const CaseJudge never = [](const LaunchSpec&) { return CaseVerdict{}; };
  const rc::Shrinkable<LaunchSpec> original = drawn_spec(11);
  RunTally first;
  first.add(std::string("x"), false);
  for (int i = 0; i < 5; ++i)
    first.add(std::nullopt, false);
  const ShrinkOutcome out =
      shrink_finding(original, first, "kernel:precopy:state-bytes:copy", never, 5, ShrinkLimits{});
  EXPECT_FALSE(out.kept);
  EXPECT_EQ(out.steps, 0);
  EXPECT_TRUE(out.spec == original.value());
  EXPECT_EQ(out.saved_runs.summary(), "failed 1 of 6 runs");
}

// A failure of another signature does not count for this one: the shrinker does not walk
// from one bug into another.
TEST(ShrinkUnderNoise, AnotherSignatureIsNotThisFinding) {
  const CaseJudge other = [](const LaunchSpec&) {
    CaseVerdict v;
    v.failure = "y";
    v.signature = {.level = "kernel", .kind = "precopy", .difference = "decisions", .shape = "copy"};
    return v;
  };
  const rc::Shrinkable<LaunchSpec> original = drawn_spec(12);
  RunTally first;
  first.add(std::string("x"), false);
  const ShrinkOutcome out =
      shrink_finding(original, first, "kernel:precopy:state-bytes:copy", other, 3, ShrinkLimits{});
  EXPECT_FALSE(out.kept);
  EXPECT_TRUE(out.spec == original.value());
}

// A verdict survives the trip from an isolated child process: every field, the difference's
// arena location included, comes back equal.
TEST(CaseVerdict, JsonRoundTripKeepsEveryField) {
  const LaunchRunner mutated = [](const model::LaunchCase& launch) {
    return gpu::run_launch_host(launch, gpu::Mutant::same_block_copy_skipped);
  };
  int compared = 0;
  for (std::uint64_t seed = 1; seed < 200 && compared < 3; ++seed) {
    const CaseVerdict v = judge_case(drawn_spec(seed).value(), mutated);
    if (!v.failure) continue;
    ++compared;
    const CaseVerdict back = verdict_from_json(nlohmann::json::parse(to_json(v).dump()));
    EXPECT_EQ(back.failure, v.failure);
    ASSERT_TRUE(back.difference.has_value());
    EXPECT_EQ(to_json(*back.difference), to_json(*v.difference));
    ASSERT_TRUE(v.difference->arena_location.has_value());
    EXPECT_EQ(back.difference->arena_location->block_id, v.difference->arena_location->block_id);
    EXPECT_EQ(back.row, v.row);
    EXPECT_EQ(back.signature.to_string(), v.signature.to_string());
    EXPECT_EQ(back.signature.features, v.signature.features);
    EXPECT_EQ(back.copies, v.copies);
    EXPECT_EQ(back.arena_bytes, v.arena_bytes);
    EXPECT_EQ(back.backend_error, v.backend_error);
    EXPECT_EQ(back.coverage.counts, v.coverage.counts);
  }
  EXPECT_EQ(compared, 3);
}

// differing_pairs names exactly the copies and array entries that differ: one flipped byte in
// one decision's destination block and one changed num_accepted give exactly two lines.
TEST(DifferingPairs, NamesEachDifferingCopyAndArrayEntry) {
  for (std::uint64_t seed = 1; seed < 100; ++seed) {
    const LaunchSpec spec = drawn_spec(seed).value();
    if (spec.kind != model::LaunchKind::postprocess_align) continue;
    const model::LaunchCase launch = materialize(spec);
    const model::LaunchResult expected = oracle::run_launch(launch);
    if (expected.decisions.empty() || expected.requests.num_accepted.empty()) continue;
    EXPECT_TRUE(differing_pairs(launch, expected, expected.clone()).empty());
    model::LaunchResult actual = expected.clone();
    const model::CopyDecision& d = expected.decisions.back();
    const model::StateTensor& t = launch.layout.tensors[static_cast<std::size_t>(d.tensor)];
    std::byte& b = actual.arenas[static_cast<std::size_t>(t.arena)]
                       .data()[t.block_offset_bytes(d.dst_block_id) + 3 % t.natural_bytes];
    b = ~b;
    actual.requests.num_accepted[0] += 1;
    const std::vector<std::string> lines = differing_pairs(launch, expected, actual);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0], fmt::format("row {} (slot {}), group {} layer {} {}, block {}: 1 of {} "
                                    "bytes differ, from byte {}",
                                    d.batch_row, d.slot, d.group, d.layer, t.shape.name,
                                    d.dst_block_id, t.natural_bytes, 3 % t.natural_bytes));
    EXPECT_EQ(lines[1], fmt::format("num_accepted[0]: expected {}, actual {}",
                                    expected.requests.num_accepted[0],
                                    expected.requests.num_accepted[0] + 1));
    return;
  }
  FAIL() << "no postprocess_align case with a copy among 99 seeds";
}

} // namespace
} // namespace mc::fuzz
