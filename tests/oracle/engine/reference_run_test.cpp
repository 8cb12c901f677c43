// Whole runs on the fast and on the plain structures (oracle/engine/structures.h, `--reference`):
// two engines with the same workload and seed must schedule the same steps, make the same
// launches, decisions, accesses and checks, and end with the same report and arena bytes; the
// same steps replayed without their keys (as a trace gives them) must do the same on both.
#include "model/presets.h"
#include "model/prng.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/replay.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mc::oracle::engine {
namespace {

std::string dump(const model::Step& s) {
  std::string out = fmt::format("step {} reset {}\n", s.index, s.reset_prefix_cache);
  for (const model::NewRequestData& n : s.new_requests)
    out += fmt::format("new {} key {} computed {} prompt {} blocks {}\n", n.req_id, n.key,
                       n.num_computed_tokens, n.prompt_token_ids, n.block_ids);
  for (const model::CachedRequestData& c : s.cached_requests)
    out += fmt::format("cached {} key {} resumed {} computed {} blocks {}\n", c.req_id, c.key,
                       c.resumed, c.num_computed_tokens, c.new_block_ids);
  for (const model::ScheduledRequest& r : s.scheduled)
    out +=
        fmt::format("row {} key {} scheduled {} drafts {} accepted {} tokens {}\n", r.req_id, r.key,
                    r.num_scheduled_tokens, r.num_draft_tokens, r.num_accepted_tokens, r.token_ids);
  out += fmt::format("preempted {} finished {}\n", s.preempted_req_ids, s.finished_req_ids);
  return out;
}

std::string dump(const AccessLog& log) {
  std::string out;
  for (const auto* list : {&log.writes, &log.copy_reads}) {
    for (const BlockAccess& a : *list)
      out += fmt::format("({} {} {} {} {} {}) ", a.batch_row, a.tensor, a.group, a.col, a.block_id,
                         a.origin);
    out += "\n";
  }
  return out;
}

void expect_same_record(const StepRecord& fast, const StepRecord& plain) {
  EXPECT_EQ(fast.step, plain.step);
  EXPECT_EQ(fast.bytes_checked, plain.bytes_checked);
  EXPECT_EQ(dump(fast.access), dump(plain.access));
  EXPECT_EQ(fast.finding.has_value(), plain.finding.has_value());
  if (fast.finding && plain.finding) {
    EXPECT_EQ(fast.finding->message, plain.finding->message);
  }
  ASSERT_EQ(fast.launches.size(), plain.launches.size());
  for (std::size_t i = 0; i < fast.launches.size(); ++i) {
    const LaunchRecord& f = fast.launches[i];
    const LaunchRecord& p = plain.launches[i];
    EXPECT_EQ(f.kind, p.kind);
    EXPECT_EQ(f.status, p.status);
    EXPECT_EQ(f.unsupported_reason, p.unsupported_reason);
    EXPECT_TRUE(f.decisions == p.decisions) << "launch " << i;
    EXPECT_TRUE(f.requests == p.requests) << "launch " << i;
  }
}

void expect_same_arenas(OracleRunner& fast, OracleRunner& plain) {
  // The fast runner keeps meanings, the plain one bytes: the meanings made into bytes must be
  // the bytes.
  const std::vector<model::Arena>& meant = fast.states().arenas();
  const std::vector<model::Arena>& bytes = plain.states().arenas();
  ASSERT_EQ(meant.size(), bytes.size());
  for (std::size_t a = 0; a < meant.size(); ++a)
    EXPECT_EQ(meant[a].first_difference(bytes[a]), -1) << "arena " << a;
}

void expect_same_report(const EngineReport& f, const EngineReport& p) {
  EXPECT_EQ(f.steps, p.steps);
  EXPECT_EQ(f.request_steps, p.request_steps);
  EXPECT_EQ(f.tokens, p.tokens);
  EXPECT_EQ(f.finished, p.finished);
  EXPECT_EQ(f.aborts, p.aborts);
  EXPECT_EQ(f.preemptions, p.preemptions);
  EXPECT_EQ(f.forced_preemptions, p.forced_preemptions);
  EXPECT_EQ(f.resets, p.resets);
  EXPECT_EQ(f.prefix_hits, p.prefix_hits);
  EXPECT_EQ(f.copies_by_kind, p.copies_by_kind);
  EXPECT_EQ(f.launches, p.launches);
  EXPECT_EQ(f.bytes_checked, p.bytes_checked);
  EXPECT_EQ(f.first_finding.has_value(), p.first_finding.has_value());
}

struct RunCase {
  const char* preset;
  model::CacheMode mode;
  model::RunnerFlavour flavour;
  V1CopyPath copy_path;
  std::int32_t num_spec;
  std::int64_t num_blocks;
  bool async;
};

class BothStructures : public ::testing::TestWithParam<RunCase> {
protected:
  void SetUp() override {
    const RunCase& rc = GetParam();
    const model::Preset& preset = model::find_preset(rc.preset);
    model::CacheConfig config = preset.config;
    config.mode = rc.mode;
    config.runner = rc.flavour;
    config.num_spec_tokens = rc.num_spec;
    config.num_spec_blocks = rc.num_spec; // one speculative block per draft, in both modes
    model::LayoutSpec spec = preset.spec;
    spec.num_blocks = rc.num_blocks;
    layout_ = model::build_layout(config, spec);
    options_.runner.flavour = rc.flavour;
    options_.runner.v1_copy_path = rc.copy_path;
    options_.scheduler.reset_prefix_cache_per_million = 10'000;
    options_.scheduler.abort_per_million = 5'000;
    options_.scheduler.async_scheduling = rc.async;
  }

  std::vector<RequestSpec> workload() const {
    model::SplitMix64 rng = model::SplitMix64::from_seed(kSeed);
    return generate_workload(options_.workload, 300, model::kSpecTokensMax + 2, rng);
  }

  static constexpr std::uint64_t kSeed = 5;
  model::Layout layout_;
  EngineOptions options_;
};

TEST_P(BothStructures, SameStepsRecordsReportAndBytes) {
  EngineOptions plain_options = options_;
  plain_options.structures = Structures::reference;
  Engine fast(layout_, workload(), kSeed, options_);
  Engine plain(layout_, workload(), kSeed, plain_options);
  std::vector<model::Step> steps;
  for (int i = 0; i < 3000; ++i) {
    const bool fast_more = fast.step();
    const bool plain_more = plain.step();
    ASSERT_EQ(fast_more, plain_more) << "step " << i;
    ASSERT_EQ(dump(fast.last_step()), dump(plain.last_step())) << "step " << i;
    ASSERT_NO_FATAL_FAILURE(expect_same_record(fast.last_record(), plain.last_record()))
        << "step " << i;
    steps.push_back(fast.last_step());
    if (!fast_more) break;
  }
  expect_same_report(fast.report(), plain.report());
  EXPECT_FALSE(fast.report().first_finding.has_value()) << fast.report().first_finding->message;
  EXPECT_GT(fast.report().preemptions + fast.report().forced_preemptions, 0);
  EXPECT_GT(fast.report().prefix_hits, 0);
  expect_same_arenas(fast.runner(), plain.runner());

  // The same steps as a trace gives them (no keys), replayed on both, under the engine's own
  // contract (its async traces declare the hold-back of an unordered writer).
  const model::SchedulerContract contract{.unordered_writer = GetParam().async};
  Replayer fast_replay(layout_, options_.runner, 64, Structures::fast, GetParam().async, contract);
  Replayer plain_replay(layout_, options_.runner, 64, Structures::reference, GetParam().async,
                        contract);
  for (model::Step& step : steps) {
    for (model::NewRequestData& n : step.new_requests)
      n.key = -1;
    for (model::CachedRequestData& c : step.cached_requests)
      c.key = -1;
    for (model::ScheduledRequest& s : step.scheduled)
      s.key = -1;
    const std::optional<Finding> f = fast_replay.step(step);
    const std::optional<Finding> p = plain_replay.step(step);
    ASSERT_FALSE(f.has_value()) << f->message;
    ASSERT_FALSE(p.has_value()) << p->message;
    ASSERT_NO_FATAL_FAILURE(
        expect_same_record(fast_replay.last_record(), plain_replay.last_record()))
        << "step " << step.index;
  }
  const ReplayStats& f = fast_replay.stats();
  const ReplayStats& p = plain_replay.stats();
  EXPECT_EQ(f.steps, p.steps);
  EXPECT_EQ(f.request_steps, p.request_steps);
  EXPECT_EQ(f.prefix_hits, p.prefix_hits);
  EXPECT_EQ(f.copies_by_kind, p.copies_by_kind);
  EXPECT_EQ(f.bytes_checked, p.bytes_checked);
  expect_same_arenas(fast_replay.runner(), plain_replay.runner());
}

using model::CacheMode;
using model::RunnerFlavour;

INSTANTIATE_TEST_SUITE_P(
    Matrix, BothStructures,
    ::testing::Values(
        RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1, V1CopyPath::precopy, 2, 24,
                false},
        RunCase{"tiny-mamba2", CacheMode::align, RunnerFlavour::v1, V1CopyPath::batch_copy, 2, 24,
                false},
        RunCase{"tiny-gdn", CacheMode::align, RunnerFlavour::v2, V1CopyPath::precopy, 1, 16, true},
        RunCase{"tiny-mixed", CacheMode::align, RunnerFlavour::v1, V1CopyPath::precopy, 0, 16,
                true},
        RunCase{"tiny-kda", CacheMode::all, RunnerFlavour::v2, V1CopyPath::precopy, 0, 32, false},
        RunCase{"tiny-mamba2", CacheMode::all, RunnerFlavour::v1, V1CopyPath::precopy, 0, 32,
                false},
        RunCase{"tiny-gdn", CacheMode::all, RunnerFlavour::v2, V1CopyPath::precopy, 2, 40,
                false}));

} // namespace
} // namespace mc::oracle::engine
