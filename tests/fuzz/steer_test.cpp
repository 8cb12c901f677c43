// Steering the engine-level generator (fuzz/engine/steer.h): the boost rule at its thresholds,
// unboosted cases are the unsteered generator's, and a boosted knob changes the draws it names.
#include "fuzz/engine/engine_fuzz.h"
#include "fuzz/engine/steer.h"
#include "model/errors.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace mc::fuzz {
namespace {

using F = model::CoverageFeatureId;

TEST(SteerTable, KnobNamesRoundTrip) {
  std::set<std::string_view> names;
  for (std::size_t k = 0; k < kSteerKnobCount; ++k) {
    const auto knob = static_cast<SteerKnob>(k);
    EXPECT_EQ(find_steer_knob(to_string(knob)), knob);
    EXPECT_TRUE(names.insert(to_string(knob)).second);
  }
  SteerBoosts b;
  EXPECT_EQ(to_string(b), "");
  EXPECT_FALSE(b.any());
  b.knobs[static_cast<std::size_t>(SteerKnob::all_mode)] = SteerBoost::missing;
  b.knobs[static_cast<std::size_t>(SteerKnob::tight_pool)] = SteerBoost::rare;
  EXPECT_EQ(to_string(b), "all-mode=missing,tight-pool=rare");
  EXPECT_EQ(parse_steer_boosts(to_string(b)), b);
  EXPECT_THROW(parse_steer_boosts("all-mode"), model::InputError);
  EXPECT_THROW(parse_steer_boosts("all-mode=often"), model::InputError);
  EXPECT_THROW(parse_steer_boosts("no-such-knob=rare"), model::InputError);
}

// Reached by none: missing; by fewer than 1 in 20 of the cases: rare; a knob takes the highest
// boost of its features.
TEST(SteerRule, BoostsAtTheThresholds) {
  EXPECT_FALSE(steer_boosts(SteerTally{}).any()); // epoch 0: no counts, no boost
  SteerTally t;
  t.cases = 100;
  for (const model::CoverageFeature& f : model::coverage_catalogue())
    if (f.engine) t.cases_reaching[std::string(f.name)] = 100;
  EXPECT_FALSE(steer_boosts(t).any());
  t.cases_reaching["abort"] = 5; // 5 in 100: not rare
  EXPECT_FALSE(steer_boosts(t).any());
  t.cases_reaching["abort"] = 4;
  EXPECT_EQ(to_string(steer_boosts(t)), "abort=rare");
  t.cases_reaching["abort"] = 0;
  EXPECT_EQ(to_string(steer_boosts(t)), "abort=missing");
  // all-mode-record: all mode, drafts, every draft accepted; drafts is also rare for another
  // feature, and the highest boost wins.
  t.cases_reaching["same-block-shift"] = 1;
  t.cases_reaching["all-mode-record"] = 0;
  EXPECT_EQ(to_string(steer_boosts(t)),
            "all-mode=missing,drafts=missing,full-drafts=missing,abort=missing");
}

TEST(SteerRule, TallyCountsCasesNotEvents) {
  SteerTally t;
  model::Coverage c = model::Coverage::empty(model::CoverageLevel::engine);
  c.add(F::preemption, 7);
  t.add(c);
  t.add(model::Coverage::empty(model::CoverageLevel::engine));
  EXPECT_EQ(t.cases, 2);
  EXPECT_EQ(t.cases_reaching["preemption"], 1);
  EXPECT_FALSE(t.cases_reaching.contains("abort"));
}

// Unboosted, the generator draws what it always drew; a boosted knob moves the share of its
// choice and leaves the draws it does not name alone.
TEST(SteerGenerator, BoostedKnobsMoveTheirChoiceOnly) {
  EngineCaseFixed all;
  all.steer.knobs[static_cast<std::size_t>(SteerKnob::all_mode)] = SteerBoost::missing;
  int all_default = 0, all_steered = 0, same_requests = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const int size = static_cast<int>(seed % 31);
    const EngineCase a = generate_engine_case(seed, size);
    EXPECT_EQ(to_json(a).dump(), to_json(generate_engine_case(seed, size, {})).dump());
    const EngineCase b = generate_engine_case(seed, size, all);
    all_default += a.config.mode == model::CacheMode::all;
    all_steered += b.config.mode == model::CacheMode::all;
    EXPECT_TRUE(a.config.mode != model::CacheMode::all || b.config.mode == model::CacheMode::all);
    if (a.config.mode == b.config.mode) {
      EXPECT_EQ(to_json(a).dump(), to_json(b).dump());
    }
    same_requests += a.requests.size() == b.requests.size();
  }
  EXPECT_EQ(all_default, 67);
  EXPECT_EQ(all_steered, 238);
  EXPECT_EQ(same_requests, 400);
}

// Wide batches: 8 to 16 running requests, at least as many requests, a pool that holds them
// all, prompts of at most a block (decode-only steps of many rows, padded for a CUDA graph).
TEST(SteerGenerator, WideBatchesRunManyRequestsAtOnce) {
  EngineCaseFixed wide;
  wide.steer.knobs[static_cast<std::size_t>(SteerKnob::wide_batches)] = SteerBoost::missing;
  int widened = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const EngineCase c = generate_engine_case(seed, 30, wide);
    const oracle::engine::SchedulerOptions& s = c.engine.scheduler;
    if (s.max_running < 8) continue;
    ++widened;
    EXPECT_GE(static_cast<std::int32_t>(c.requests.size()), std::min(s.max_running, 16));
    EXPECT_LE(c.engine.workload.prompt_len_max, c.config.mamba_block_size);
  }
  EXPECT_EQ(widened, 101); // about half: the missing boost
}

// How many requests of a case start with an earlier request's whole sequence (its prompt and
// output) and go on with a prompt of their own: a chat's next turn.
int count_follow_ups(const EngineCase& c) {
  int n = 0;
  for (std::size_t k = 1; k < c.requests.size(); ++k)
    for (std::size_t j = 0; j < k; ++j) {
      const oracle::engine::RequestSpec& last = c.requests[j];
      const oracle::engine::RequestSpec& next = c.requests[k];
      if (next.num_prompt_tokens > last.max_len &&
          std::equal(last.tokens.begin(), last.tokens.begin() + last.max_len,
                     next.tokens.begin())) {
        ++n;
        break;
      }
    }
  return n;
}

// Follow-up turns: none below size 40 unless steered (the small campaigns drawn before them
// stay what they were), forced by the follow-ups knob, drawn in a quarter of the cases above.
TEST(SteerGenerator, FollowUpsContinueAnEarlierRequestsWholeSequence) {
  EngineCaseFixed turns;
  turns.steer.knobs[static_cast<std::size_t>(SteerKnob::follow_ups)] = SteerBoost::missing;
  int small = 0, steered = 0, large = 0, large_cases = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    small += count_follow_ups(generate_engine_case(seed, 30, {}));
    steered += count_follow_ups(generate_engine_case(seed, 30, turns));
    const int n = count_follow_ups(generate_engine_case(seed, 60, {}));
    large += n;
    large_cases += n > 0;
  }
  EXPECT_EQ(small, 0);
  EXPECT_EQ(steered, 182);
  EXPECT_EQ(large, 334);
  EXPECT_EQ(large_cases, 58); // about a quarter of the 200
}

} // namespace
} // namespace mc::fuzz
