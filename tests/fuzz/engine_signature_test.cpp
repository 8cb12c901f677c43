// The signature of a failing engine case (fuzz/engine/engine_fuzz.h), pinned text: what failed
// (the launch kind, an oracle check, or the step), the kind of difference, and the runner as
// the shape; and --skip-signature naming it in either printed form.
#include "fuzz/engine/engine_fuzz.h"
#include "fuzz/findings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mc::fuzz {
namespace {

EngineCase with_runner(model::RunnerOptions runner,
                       model::CacheMode mode = model::CacheMode::align) {
  EngineCase c;
  c.config.mode = mode;
  c.engine.runner = runner;
  return c;
}

harness::Difference difference(std::string kind, std::string launch_kind = "",
                               std::string array = "") {
  return {
      .kind = std::move(kind), .launch_kind = std::move(launch_kind), .array = std::move(array)};
}

TEST(EngineSignature, ALaunchsDifferenceNamesItsKind) {
  const EngineCase c = with_runner({});
  const Signature s = engine_signature(c, difference("arena", "postprocess"));
  EXPECT_EQ(s.key(), "engine:postprocess:arena:v1-precopy");
  EXPECT_EQ(s.to_string(), "engine:postprocess:deterministic:arena:v1-precopy");
  EXPECT_EQ(s.level, "engine");
  EXPECT_EQ(s.features, (std::vector<std::string>{"v1-precopy"}));
  EXPECT_EQ(engine_signature(c, difference("decision", "precopy")).key(),
            "engine:precopy:decision:v1-precopy");
}

TEST(EngineSignature, AnArrayNamesTheArray) {
  const EngineCase c = with_runner({});
  EXPECT_EQ(engine_signature(c, difference("array", "postprocess", "num_accepted_out")).key(),
            "engine:postprocess:array-num_accepted_out:v1-precopy");
  EXPECT_EQ(engine_signature(c, difference("array", "postprocess")).key(),
            "engine:postprocess:array:v1-precopy");
}

// Without a launch: a finding of the oracle's checks, or a difference of the step itself.
TEST(EngineSignature, WithoutALaunchAnOracleCheckOrTheStep) {
  const EngineCase c = with_runner({});
  const Signature finding = engine_signature(c, difference("finding:wrong_read"));
  EXPECT_EQ(finding.key(), "engine:oracle-check:finding:wrong_read:v1-precopy");
  EXPECT_EQ(finding.to_string(), "engine:oracle-check:deterministic:finding:wrong_read:v1-precopy");
  EXPECT_EQ(engine_signature(c, difference("launch_count")).key(),
            "engine:step:launch_count:v1-precopy");
  EXPECT_EQ(engine_signature(c, difference("metadata")).key(), "engine:step:metadata:v1-precopy");
  // A finding inside a launch is that launch's.
  EXPECT_EQ(engine_signature(c, difference("finding:launch_rejected", "batch_copy")).key(),
            "engine:batch_copy:finding:launch_rejected:v1-precopy");
}

TEST(EngineSignature, TheShapeIsTheRunner) {
  const harness::Difference d = difference("arena", "precopy");
  const auto shape = [&](model::RunnerOptions runner, model::CacheMode mode) {
    return engine_signature(with_runner(runner, mode), d).shape;
  };
  const model::CacheMode align = model::CacheMode::align;
  EXPECT_EQ(shape({.v1_copy_path = model::V1CopyPath::precopy}, align), "v1-precopy");
  EXPECT_EQ(shape({.v1_copy_path = model::V1CopyPath::batch_copy}, align), "v1-batch_copy");
  EXPECT_EQ(shape({.v1_copy_path = model::V1CopyPath::precopy_v1}, align), "v1-precopy_v1");
  EXPECT_EQ(shape({.flavour = model::RunnerFlavour::v2}, align), "v2");
  EXPECT_EQ(shape({.flavour = model::RunnerFlavour::v2, .v2_table_rows = model::V2TableRows::slot},
                  align),
            "v2-slot-tables");
  EXPECT_EQ(shape({.flavour = model::RunnerFlavour::v2,
                   .v2_table_rows = model::V2TableRows::slot,
                   .deferred_postprocess = true},
                  align),
            "v2-slot-tables-deferred");
  // All mode is one shape whatever the runner.
  EXPECT_EQ(shape({}, model::CacheMode::all), "all");
  EXPECT_EQ(shape({.flavour = model::RunnerFlavour::v2}, model::CacheMode::all), "all");
  EXPECT_EQ(engine_signature(with_runner({}, model::CacheMode::all), d).key(),
            "engine:precopy:arena:all");
}

// --skip-signature takes a signature as printed (with its classification) or as its key; an
// engine finding's difference holds a colon of its own.
TEST(EngineSignature, SkipNamesItInEitherForm) {
  const EngineCase c = with_runner({.flavour = model::RunnerFlavour::v2});
  for (const harness::Difference& d :
       {difference("arena", "postprocess_align"), difference("finding:wrong_next_state")}) {
    Signature s = engine_signature(c, d);
    s.classification = Classification::nondeterministic;
    EXPECT_TRUE(signature_matches(s, s.key())) << s.key();
    EXPECT_TRUE(signature_matches(s, s.to_string())) << s.to_string();
    Signature other = s;
    other.shape = "v1-precopy";
    EXPECT_FALSE(signature_matches(other, s.to_string())) << s.to_string();
    EXPECT_FALSE(signature_matches(other, s.key())) << s.key();
  }
}

} // namespace
} // namespace mc::fuzz
