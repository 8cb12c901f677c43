// The block manager's rules held against each step (oracle/engine/table_rules.h) and failed
// assertions of the model reported as findings (model/errors.h, AssertionsReported), on
// hand-derived runs of tiny-mamba2 (B = 4, attention block 2, 2 drafts, nsb = 2, budget 8):
//
// Prefix hits. r0 (prompt 10) prefills 8 tokens in step 0: table [0 1 2 3], the state after 8
// tokens in block 1, cached when the step commits; position 0 (boundary 4) stays null, so
// boundary 4 is never cached. r1 arrives in step 1 with the same prompt: the boundaries it may
// hit are 4 and 8 (<= 9 tokens), of which 8 is cached: its hit is 8 tokens.
// With a prompt of exactly 8 tokens r1 may hit boundary 4 only (the last token is always
// computed), which is not cached: no hit, although boundary 8 is.
//
// Speculative blocks. r0 (prompt 20) prefills 8 tokens in step 0 (table [0 1 2 3], running
// column 1, speculative blocks 2 and 3), then 8 more in step 1: the running column becomes 3,
// block 2 (column 2) moves to the end and one new block (4) follows: appended [2 4].
#include "model/block_table.h"
#include "model/presets.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/replay.h"
#include "oracle/engine/step_probe.h"
#include "oracle/engine/table_rules.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

namespace mc::oracle::engine {
namespace {

using Table = std::vector<std::int32_t>;

model::Layout tiny_layout() {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  return model::build_layout(p.config, p.spec);
}

RequestSpec request(std::string id, std::int32_t num_prompt, std::int32_t max_len,
                    std::int64_t arrival) {
  RequestSpec r{.req_id = std::move(id),
                .num_prompt_tokens = num_prompt,
                .max_len = max_len,
                .arrival_step = arrival};
  r.tokens.resize(static_cast<std::size_t>(max_len + 20));
  std::iota(r.tokens.begin(), r.tokens.end(), 100); // every request: the same sequence
  return r;
}

EngineOptions options() {
  EngineOptions o;
  o.scheduler.token_budget = 8;
  o.scheduler.full_drafts_per_million = 1'000'000;
  o.runner.v1_copy_path = V1CopyPath::precopy;
  return o;
}

// Sets the step probe for the life of the object.
struct ProbeAt {
  explicit ProbeAt(std::int64_t failing_step) {
    set_step_probe_for_testing(
        [failing_step](std::int64_t step) { MC_ASSERT(step != failing_step); });
  }
  ~ProbeAt() { set_step_probe_for_testing({}); }
};

const model::NewRequestData* new_request(const model::Step& s, const std::string& id) {
  for (const model::NewRequestData& n : s.new_requests)
    if (n.req_id == id) return &n;
  return nullptr;
}

TEST(PrefixHitRule, LongestCachedBoundaryIsTaken) {
  const model::Layout layout = tiny_layout();
  Engine e(layout, {request("r0", 10, 20, 0), request("r1", 10, 20, 1)}, 1, options());
  ASSERT_TRUE(e.step());
  ASSERT_TRUE(e.step());
  const model::NewRequestData* r1 = new_request(e.last_step(), "r1");
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->num_computed_tokens, 8);
  EXPECT_EQ(r1->block_ids[0][1], 1); // the block that holds the state after 8 tokens
  ASSERT_EQ(e.scheduler().prefix_lookups().size(), 1u);
  EXPECT_EQ(e.scheduler().prefix_lookups()[0].longest_tokens, 8);
  for (int i = 0; i < 40 && e.step(); ++i) {
  }
  ASSERT_FALSE(e.report().first_finding) << e.report().first_finding->message;
  EXPECT_EQ(e.report().prefix_hits, 1);
}

TEST(PrefixHitRule, AShorterHitIsAFinding) {
  const model::Layout layout = tiny_layout();
  Engine e(layout, {request("r0", 10, 20, 0), request("r1", 10, 20, 1)}, 1, options());
  ASSERT_TRUE(e.step());
  EXPECT_FALSE(e.step([](model::Step& s) {
    for (model::NewRequestData& n : s.new_requests)
      if (n.req_id == "r1") n.num_computed_tokens = 4;
  }));
  const std::optional<Finding>& f = e.report().first_finding;
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::wrong_prefix_hit);
  EXPECT_EQ(f->step, 1);
  EXPECT_EQ(f->req_id, "r1");
  EXPECT_EQ(f->message, "wrong_prefix_hit: step 1, request r1: takes a prefix hit of 4 tokens (1 "
                        "blocks of 4), shorter than the longest cached block-aligned prefix of 8 "
                        "tokens; expected a hit of 8 tokens");
}

TEST(PrefixHitRule, TheLastTokenIsNeverAHit) {
  const model::Layout layout = tiny_layout();
  Engine clean(layout, {request("r0", 8, 20, 0), request("r1", 8, 20, 1)}, 1, options());
  ASSERT_TRUE(clean.step());
  ASSERT_TRUE(clean.step());
  ASSERT_NE(new_request(clean.last_step(), "r1"), nullptr);
  EXPECT_EQ(new_request(clean.last_step(), "r1")->num_computed_tokens, 0);
  EXPECT_NE(clean.scheduler().blocks().pool(0).cached(1), nullptr); // boundary 8 is cached

  Engine e(layout, {request("r0", 8, 20, 0), request("r1", 8, 20, 1)}, 1, options());
  ASSERT_TRUE(e.step());
  EXPECT_FALSE(e.step([](model::Step& s) {
    for (model::NewRequestData& n : s.new_requests)
      if (n.req_id == "r1") n.num_computed_tokens = 8;
  }));
  const std::optional<Finding>& f = e.report().first_finding;
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::wrong_prefix_hit);
  EXPECT_EQ(f->message, "wrong_prefix_hit: step 1, request r1: takes a prefix hit of 8 tokens (2 "
                        "blocks of 4), longer than the longest cached block-aligned prefix of 0 "
                        "tokens; expected a hit of 0 tokens");
}

// The steps of a clean run, replayed: they hold; with r1's hit cut short in its trace step, the
// replay names that step and request.
TEST(PrefixHitRule, ReplayHoldsATraceToTheLongestHit) {
  const model::Layout layout = tiny_layout();
  Engine e(layout, {request("r0", 10, 20, 0), request("r1", 10, 20, 1)}, 1, options());
  std::vector<model::Step> steps;
  while (e.step())
    steps.push_back(e.last_step());
  ASSERT_FALSE(e.report().first_finding) << e.report().first_finding->message;
  steps.push_back(e.last_step());
  {
    Replayer replayer(layout, options().runner);
    for (const model::Step& s : steps) {
      const std::optional<Finding> f = replayer.step(s);
      ASSERT_FALSE(f) << f->message;
    }
    EXPECT_EQ(replayer.stats().prefix_hits, 1);
  }
  for (const std::int32_t wrong : {0, 4}) {
    Replayer replayer(layout, options().runner);
    ASSERT_FALSE(replayer.step(steps[0]));
    model::Step edited = steps[1];
    for (model::NewRequestData& n : edited.new_requests)
      if (n.req_id == "r1") n.num_computed_tokens = wrong;
    const std::optional<Finding> f = replayer.step(edited);
    ASSERT_TRUE(f.has_value()) << wrong;
    EXPECT_EQ(f->kind, FindingKind::wrong_prefix_hit);
    EXPECT_EQ(f->step, 1);
    EXPECT_EQ(f->req_id, "r1");
    EXPECT_NE(f->message.find(fmt::format("takes a prefix hit of {} tokens", wrong)),
              std::string::npos)
        << f->message;
  }
}

TEST(LongestPrefixHit, BoundedByTheLastTokenAndTheHashesKnown) {
  BlockPool pool(8, Structures::fast);
  std::vector<model::TokenHash> h(13);
  std::iota(h.begin(), h.end(), model::TokenHash{1000});
  const std::vector<std::int32_t> no_tail;
  pool.register_block(3, h[8], 1, no_tail, 8);
  pool.register_block(5, h[12], 2, no_tail, 12);
  const std::span<const BlockPool> pools(&pool, 1);
  EXPECT_EQ(longest_prefix_hit(pools, 4, h, 13), 12);
  EXPECT_EQ(longest_prefix_hit(pools, 4, h, 12), 8); // 12 tokens: boundary 12 is the last token
  EXPECT_EQ(longest_prefix_hit(pools, 4, std::span(h).first(12), 20), 8); // h[12] unknown
  EXPECT_EQ(longest_prefix_hit(pools, 4, h, 8), 0);
  EXPECT_EQ(longest_prefix_hit(pools, 3, h, 13), 12); // boundaries 3, 6, 9, 12 with B = 3
  EXPECT_EQ(longest_prefix_hit(pools, 3, h, 12), 0);  // 3, 6, 9: none cached
}

TEST(SpecBlocksRule, MovedBlocksHoldAndABlockLeftBehindIsAFinding) {
  const model::Layout layout = tiny_layout();
  Engine clean(layout, {request("r0", 20, 30, 0)}, 1, options());
  ASSERT_TRUE(clean.step());
  EXPECT_EQ(clean.last_step().new_requests[0].block_ids[0], (Table{0, 1, 2, 3}));
  ASSERT_TRUE(clean.step());
  EXPECT_EQ(clean.last_step().cached_requests[0].new_block_ids[0], (Table{2, 4}));
  EXPECT_EQ(clean.scheduler().blocks().find("r0")->groups[0].block_ids, (Table{0, 1, 0, 3, 2, 4}));

  Engine e(layout, {request("r0", 20, 30, 0)}, 1, options());
  ASSERT_TRUE(e.step());
  EXPECT_FALSE(e.step([](model::Step& s) {
    s.cached_requests[0].new_block_ids[0] = {5, 4}; // a fresh block where block 2 should move
  }));
  const std::optional<Finding>& f = e.report().first_finding;
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::spec_blocks_not_moved);
  EXPECT_EQ(f->step, 1);
  EXPECT_EQ(f->col, 2);
  EXPECT_EQ(f->block_id, 2);
  EXPECT_EQ(f->message,
            "spec_blocks_not_moved: step 1, request r0, column 2, block 2: group 0: the table "
            "grows from 4 to 6 entries and the running block to column 3, but the speculative "
            "block at column 2 stays there (appended: [5, 4]); expected block 2 moved to the end "
            "of the table");
}

TEST(AssertionsReported, OutsideAScopeAnAssertionAborts) {
  EXPECT_DEATH(MC_ASSERT(1 + 1 == 3), "internal assertion failed: 1 \\+ 1 == 3");
}

TEST(AssertionsReported, InsideAScopeAnAssertionThrows) {
  const model::AssertionsReported reported;
  try {
    MC_ASSERT(1 + 1 == 3);
    FAIL() << "no throw";
  } catch (const model::AssertionFailure& e) {
    EXPECT_NE(std::string(e.what()).find("1 + 1 == 3 at "), std::string::npos) << e.what();
  }
}

// A step that breaks an assumption of the runner (a growth naming one group too many) stops
// the run with a finding of that step; the engine makes no further step.
TEST(AssertionsReported, AnAssertionOfTheRunnerIsAFindingOfItsStep) {
  const model::Layout layout = tiny_layout();
  Engine e(layout, {request("r0", 20, 30, 0)}, 1, options());
  ASSERT_TRUE(e.step());
  EXPECT_FALSE(e.step([](model::Step& s) { s.cached_requests[0].new_block_ids.emplace_back(); }));
  const std::optional<Finding>& f = e.report().first_finding;
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::internal_assertion);
  EXPECT_EQ(f->step, 1);
  EXPECT_NE(f->message.find("internal_assertion: step 1: an assumption of the engine model "
                            "failed: st.row.size() == c.new_block_ids.size() at "),
            std::string::npos)
      << f->message;
  EXPECT_EQ(e.last_step().index, 1);
  EXPECT_FALSE(e.step());
}

TEST(AssertionsReported, ProbedAssertionInEngineAndReplay) {
  const model::Layout layout = tiny_layout();
  std::vector<model::Step> steps;
  {
    Engine e(layout, {request("r0", 20, 30, 0)}, 1, options());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(e.step());
      steps.push_back(e.last_step());
    }
  }
  const ProbeAt probe(2);
  Engine e(layout, {request("r0", 20, 30, 0)}, 1, options());
  EXPECT_TRUE(e.step());
  EXPECT_TRUE(e.step());
  EXPECT_FALSE(e.step());
  ASSERT_TRUE(e.report().first_finding.has_value());
  EXPECT_EQ(e.report().first_finding->kind, FindingKind::internal_assertion);
  EXPECT_EQ(e.report().first_finding->step, 2);
  EXPECT_NE(e.report().first_finding->message.find("step != failing_step"), std::string::npos);
  EXPECT_EQ(e.report().steps, 3);

  Replayer replayer(layout, options().runner);
  EXPECT_FALSE(replayer.step(steps[0]));
  EXPECT_FALSE(replayer.step(steps[1]));
  const std::optional<Finding> f = replayer.step(steps[2]);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FindingKind::internal_assertion);
  EXPECT_EQ(f->step, 2);
}

} // namespace
} // namespace mc::oracle::engine
