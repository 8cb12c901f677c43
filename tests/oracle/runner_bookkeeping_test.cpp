// Runner bookkeeping (REFERENCE.md 2), values worked out by hand with B = 4, nsb = 2.
#include "oracle/launch.h"
#include "oracle/runner_bookkeeping.h"
#include "oracle_test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace mc::oracle {
namespace {

using I32s = std::vector<std::int32_t>;

TEST(RunnerBookkeeping, CleanupDropsFinishedPreemptedAndResumed) {
  MambaStateIdx idx{{"done", 3}, {"preempted", 2}, {"forced", 9}, {"running", 1}};
  // "forced" was force-preempted by reset_prefix_cache: it shows up only in resumed ids.
  cleanup_mamba_state_idx({"done", "unknown"}, {"preempted"}, {"forced"}, idx);
  EXPECT_EQ(idx, (MambaStateIdx{{"running", 1}}));
}

TEST(RunnerBookkeeping, PreprocessMamba) {
  MambaStateIdx idx{{"running", 1}, {"forced", 9}, {"done", 0}};
  const std::vector<BatchRequest> batch{
      // fresh: prev (0 - 1) // 4 = -1; curr cdiv(5, 4) + 2 - 1 - 2 = 1; no copy.
      {.req_id = "fresh",
       .num_computed_tokens = 0,
       .num_scheduled_tokens = 5,
       .num_accepted_tokens = 1},
      // running: prev 1; curr cdiv(10, 4) - 1 = 2: copy 1 -> 2 with bias a - 1 = 1, a = 1.
      {.req_id = "running",
       .num_computed_tokens = 7,
       .num_scheduled_tokens = 3,
       .num_accepted_tokens = 2},
      // forced: its stale 9 is dropped (resumed); prev (6 - 1) // 4 = 1, curr cdiv(8, 4) - 1
      // = 1: no copy, a kept.
      {.req_id = "forced",
       .num_computed_tokens = 6,
       .num_scheduled_tokens = 2,
       .num_accepted_tokens = 3},
      // boundary: prev (4 - 1) // 4 = 0, curr cdiv(5, 4) - 1 = 1: copy 0 -> 1, bias 0.
      {.req_id = "boundary",
       .num_computed_tokens = 4,
       .num_scheduled_tokens = 1,
       .num_accepted_tokens = 1}};
  const PreprocessPlan plan =
      preprocess_mamba({.finished = {"done"}, .resumed = {"forced"}}, batch, 4, 2, idx);
  EXPECT_EQ(plan.src_col, (I32s{-1, 1, 1, 0}));
  EXPECT_EQ(plan.state_idx, (I32s{1, 2, 1, 1}));
  EXPECT_EQ(plan.token_bias, (I32s{0, 1, 2, 0}));
  EXPECT_EQ(plan.num_accepted, (I32s{1, 1, 3, 1}));
  EXPECT_EQ(plan.derived, (std::vector<std::uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(idx, (MambaStateIdx{{"fresh", 1}, {"running", 2}, {"forced", 1}, {"boundary", 1}}));

  // The plan drives a batch_copy launch: rows 1 and 3 copy, rows 0 and 2 do not.
  model::LaunchCase c =
      test_util::make_case(test_util::hand_layout(), model::LaunchKind::batch_copy, 4, 4, 5, 5);
  for (std::int32_t row = 0; row < 4; ++row)
    test_util::set_row(c, 0, row, {1 + 3 * row, 2 + 3 * row, 3 + 3 * row, 0, 0});
  c.requests = {
      .state_idx = plan.state_idx, .src_col = plan.src_col, .token_bias = plan.token_bias};
  const model::LaunchResult r = run_launch(c);
  ASSERT_EQ(r.decisions.size(), 4u);
  EXPECT_EQ(r.decisions[0].batch_row, 1);
  EXPECT_EQ(r.decisions[0].src_block_id, 5); // row 1: column 1
  EXPECT_EQ(r.decisions[0].dst_block_id, 6); // column 2
  EXPECT_EQ(r.decisions[1].src_block_id, 6); // temporal: column 1 + 1
  EXPECT_EQ(r.decisions[2].batch_row, 3);
  EXPECT_EQ(r.decisions[2].src_block_id, 10);
  EXPECT_EQ(r.decisions[2].dst_block_id, 11);
}

// vLLM's own case (tests/kernels/mamba/test_precopy_mamba_align.py at 6a391a9,
// test_preprocess_fused_align_matches_scalar_bookkeeping), B = 4, one speculative block, for
// token_bias 1 and 2: a fresh request, one that stays in its column, two that cross into
// column 2 (one from column 0 with a = bias + 1, one from column 1 with a = 2). The scalar
// bookkeeping copies the crossing rows; the fused buffers hold every row's new column, -1 and
// 0 on the rows that copy nothing, and copy exactly what the scalar path copies.
TEST(RunnerBookkeeping, VllmFusedPreprocessMatchesTheScalarBookkeeping) {
  for (const std::int32_t bias : {1, 2}) {
    MambaStateIdx columns{{"same", 1}, {"cross_a", 0}, {"cross_b", 1}};
    const std::vector<BatchRequest> batch{{.req_id = "fresh",
                                           .num_computed_tokens = 0,
                                           .num_scheduled_tokens = 1,
                                           .num_accepted_tokens = bias + 1},
                                          {.req_id = "same",
                                           .num_computed_tokens = 5,
                                           .num_scheduled_tokens = 1,
                                           .num_accepted_tokens = bias + 1},
                                          {.req_id = "cross_a",
                                           .num_computed_tokens = 8,
                                           .num_scheduled_tokens = 1,
                                           .num_accepted_tokens = bias + 1},
                                          {.req_id = "cross_b",
                                           .num_computed_tokens = 7,
                                           .num_scheduled_tokens = 2,
                                           .num_accepted_tokens = 2}};
    const PreprocessPlan plan = preprocess_mamba({}, batch, 4, 1, columns);
    EXPECT_EQ(columns, (MambaStateIdx{{"fresh", 0}, {"same", 1}, {"cross_a", 2}, {"cross_b", 2}}));
    std::vector<std::tuple<std::string, std::int32_t, std::int32_t, std::int32_t>> scalar;
    for (std::size_t b = 0; b < batch.size(); ++b)
      if (plan.src_col[b] >= 0 && plan.src_col[b] != plan.state_idx[b])
        scalar.emplace_back(batch[b].req_id, plan.src_col[b], plan.state_idx[b],
                            plan.token_bias[b]);
    using Copy = std::tuple<std::string, std::int32_t, std::int32_t, std::int32_t>;
    EXPECT_EQ(scalar, (std::vector<Copy>{{"cross_a", 0, 2, bias}, {"cross_b", 1, 2, 1}}));
    // a after the step's resets: 1 where a copy is planned, as it came in elsewhere.
    EXPECT_EQ(plan.num_accepted, (I32s{bias + 1, bias + 1, 1, 1}));
    const model::RequestArrays fused = fused_precopy_inputs(plan);
    EXPECT_TRUE(fused.idx_mapping.empty());
    EXPECT_EQ(fused.state_idx, (I32s{0, 1, 2, 2}));
    EXPECT_EQ(fused.src_col, (I32s{-1, -1, 0, 1}));
    EXPECT_EQ(fused.token_bias, (I32s{0, 0, bias, 1}));
  }
}

// vLLM's fused V1 path stages the same plan for precopy_v1: every row's curr column, and
// prev and a - 1 only where a row copies (-1 and 0 elsewhere, "forced" included: its prev
// equals its curr).
TEST(RunnerBookkeeping, FusedPrecopyInputsMarkRowsThatCopyNothing) {
  PreprocessPlan plan{.src_col = {-1, 1, 1, 0},
                      .state_idx = {1, 2, 1, 1},
                      .token_bias = {0, 1, 2, 0},
                      .num_accepted = {1, 1, 3, 1},
                      .derived = {1, 0, 1, 1}};
  const model::RequestArrays a = fused_precopy_inputs(plan);
  EXPECT_TRUE(a.idx_mapping.empty());
  EXPECT_EQ(a.state_idx, (I32s{1, 2, 1, 1}));
  EXPECT_EQ(a.src_col, (I32s{-1, 1, -1, 0}));
  EXPECT_EQ(a.token_bias, (I32s{0, 1, 0, 0}));

  // The launch copies rows 1 and 3 exactly as batch_copy did with the plan above.
  model::LaunchCase c =
      test_util::make_case(test_util::hand_layout(), model::LaunchKind::precopy_v1, 4, 4, 5, 5);
  for (std::int32_t row = 0; row < 4; ++row)
    test_util::set_row(c, 0, row, {1 + 3 * row, 2 + 3 * row, 3 + 3 * row, 0, 0});
  c.requests = a;
  const model::LaunchResult r = run_launch(c);
  ASSERT_EQ(r.decisions.size(), 4u);
  EXPECT_EQ(r.decisions[0].batch_row, 1);
  EXPECT_EQ(r.decisions[0].src_block_id, 5);
  EXPECT_EQ(r.decisions[0].dst_block_id, 6);
  EXPECT_EQ(r.decisions[1].src_block_id, 6);
  EXPECT_EQ(r.decisions[2].batch_row, 3);
  EXPECT_EQ(r.decisions[2].src_block_id, 10);
  EXPECT_EQ(r.decisions[2].dst_block_id, 11);
}

TEST(RunnerBookkeeping, PostprocessMambaAll) {
  AllModeRecords records{{"prefill", {.block = 5, .drafts = 2}},
                         {"decode", {.block = 0, .drafts = 1}},
                         {"chunk", {.block = 1, .drafts = 2}},
                         {"no-drafts", {.block = 3, .drafts = 2}}};
  const std::vector<BatchRequest> batch{
      // a full decode, 1 + 2 tokens: (9 + 3 - 1) // 4 = 2.
      {.req_id = "decode",
       .num_computed_tokens = 9,
       .num_scheduled_tokens = 3,
       .num_draft_tokens = 2},
      // one ending on a block boundary: (1 + 3 - 1) // 4 = 0.
      {.req_id = "short",
       .num_computed_tokens = 1,
       .num_scheduled_tokens = 3,
       .num_draft_tokens = 2},
      // a decode with 1 of the 2 drafts: (6 + 2 - 1) // 4 = 1, kept with its draft count
      // (vLLM keys on 1 + num_spec tokens and drops it).
      {.req_id = "partial",
       .num_computed_tokens = 6,
       .num_scheduled_tokens = 2,
       .num_draft_tokens = 1},
      // anything else is dropped: a prefill chunk, one as long as a full decode, a decode
      // without drafts.
      {.req_id = "prefill", .num_computed_tokens = 0, .num_scheduled_tokens = 7},
      {.req_id = "chunk", .num_computed_tokens = 4, .num_scheduled_tokens = 3},
      {.req_id = "no-drafts", .num_computed_tokens = 13, .num_scheduled_tokens = 1}};
  postprocess_mamba_all(batch, 4, 2, records);
  EXPECT_EQ(records, (AllModeRecords{{"decode", {.block = 2, .drafts = 2}},
                                     {"short", {.block = 0, .drafts = 2}},
                                     {"partial", {.block = 1, .drafts = 1}}}));
  AllModeRecords untouched{{"prefill", {.block = 5, .drafts = 1}}};
  postprocess_mamba_all(batch, 4, 0, untouched); // no spec decode: nothing to record
  EXPECT_EQ(untouched, (AllModeRecords{{"prefill", {.block = 5, .drafts = 1}}}));
}

// vLLM's numbers (#41233, its V2 runner test): B = 4, a 6-token prefill, then a decode with 3
// drafts of which 1 was accepted (a = 2).
TEST(RunnerBookkeeping, AllModeAnchor) {
  // No record: the fallback (c - 1) // B, clamped at 0.
  EXPECT_EQ(all_mode_anchor(nullptr, 6, 4), 1);
  EXPECT_EQ(all_mode_anchor(nullptr, 8, 4), 1);
  EXPECT_EQ(all_mode_anchor(nullptr, 1, 4), 0);
  EXPECT_EQ(all_mode_anchor(nullptr, 0, 4), 0);
  // After the decode, 8 tokens computed: the record (6 + 4 - 1) // 4 = 2, not the fallback 1.
  const AllModeRecord after{.block = 2, .drafts = 3};
  EXPECT_EQ(all_mode_anchor(&after, 8, 4), 2);
}

TEST(RunnerBookkeeping, AllModeReadColumn) {
  // No record: the anchor, the block of the last computed token.
  EXPECT_EQ(all_mode_read_column(nullptr, 3, 2), 3);
  // A record of block 5 after a decode of 1 + 2 tokens: every draft accepted reads the block
  // itself, a shorter prefix the a-th column after it.
  const AllModeRecord full{.block = 5, .drafts = 2};
  EXPECT_EQ(all_mode_read_column(&full, 5, 3), 5);
  EXPECT_EQ(all_mode_read_column(&full, 5, 1), 6);
  EXPECT_EQ(all_mode_read_column(&full, 5, 2), 7);
  // After a decode of 1 + 1 tokens: a = 2 is every draft, a = 1 the column after the block.
  const AllModeRecord partial{.block = 5, .drafts = 1};
  EXPECT_EQ(all_mode_read_column(&partial, 5, 2), 5);
  EXPECT_EQ(all_mode_read_column(&partial, 5, 1), 6);
}

TEST(RunnerBookkeeping, PrefixCachingBlockIndices) {
  const I32s computed{0, 4, 5, 7};
  const I32s seq_lens{3, 8, 0, 9};
  const PrefixCachingBlockIndices got = compute_prefix_caching_block_indices(computed, seq_lens, 4);
  // last computed: cdiv(c, 4) - 1 clamped: -1 -> 0, 0, 1, 1.
  EXPECT_EQ(got.last_computed, (I32s{0, 0, 1, 1}));
  // first scheduled: cdiv(c + 1, 4) - 1: 0, 1, 1, 1.
  EXPECT_EQ(got.first_scheduled, (I32s{0, 1, 1, 1}));
  // last scheduled: cdiv(seq_len, 4) - 1 clamped (a padded row has seq_len 0): 0, 1, 0, 2.
  EXPECT_EQ(got.last_scheduled, (I32s{0, 1, 0, 2}));
}

} // namespace
} // namespace mc::oracle
