// The check of a module's forward kernels (gpu/engine/forward_kernels.h): what the reference
// semantics write passes; each kind of wrong access is named with its block and row.
#include "gpu/engine/forward_kernels.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

namespace mc::gpu::engine {
namespace {

// Two decode rows with spec decode (windows [3,4,5] and [6,7,8], a = 2 and 3, 3 and 2 tokens)
// and a CUDA-graph padding row on the null block; conv width 4, state_len 5; one prefill row on
// block 9 with an initial state (4 tokens) and one on block 10 without (6 tokens).
ForwardKernelStep step() {
  return ForwardKernelStep{.kernels = {"ssm", "conv", "scan"},
                           .num_blocks = 12,
                           .state_len = 5,
                           .conv_width = 4,
                           .rows = 3,
                           .width = 3,
                           .state_indices = {3, 4, 5, 6, 7, 8, 0, 0, 0},
                           .num_accepted = {2, 3, 1},
                           .query_start_loc = {0, 3, 5, 8},
                           .prefill_indices = {9, 10},
                           .prefill_initial = {1, 0},
                           .prefill_query_start_loc = {0, 4, 10}};
}

ForwardKernelReport right() {
  return ForwardKernelReport{
      .ssm = {{3, 4, 1}, {4, 4, 2}, {5, 4, 3}, {6, 8, 1}, {7, 8, 2}},
      .conv = {{3, {{3, 2}, {3, 3}, {-1, 0}, {-1, 1}, {-1, 2}}},
               {6, {{6, 3}, {6, 4}, {-1, 0}, {-1, 1}, {6, 4}}}},
      .scan = {{9, 9, 4}, {10, -4, 6}}};
}

std::string row(std::int32_t r) {
  return fmt::format("row {}", r);
}

std::string check(const ForwardKernelStep& s, const ForwardKernelReport& r) {
  return check_forward_kernels(s, r, row).value_or("agree");
}

TEST(ForwardKernelCheck, TheReferenceSemanticsAgree) {
  EXPECT_EQ(check(step(), right()), "agree");
}

TEST(ForwardKernelCheck, EachWrongAccessIsNamed) {
  ForwardKernelReport r = right();
  r.ssm[1] = {4, 5, 2}; // read entry 2 (a) instead of 1
  EXPECT_EQ(check(step(), r),
            "selective_state_update wrote block 4 (entry 1 of row 0) with the state of block 5 "
            "(entry 2 of row 0) after 2 tokens; expected the state of block 4 (entry 1, "
            "num_accepted 2) after 2 tokens");
  r = right();
  r.ssm.push_back({0, 0, 3}); // a padding row not skipped
  EXPECT_EQ(check(step(), r),
            "selective_state_update wrote block 0 (the null block), which no row writes; it "
            "holds the state of block 0 (the null block) after 3 tokens");
  r = right();
  r.ssm.pop_back();
  EXPECT_EQ(check(step(), r),
            "selective_state_update never wrote block 7 (entry 1 of row 1): expected the state "
            "of block 8 (entry 2, num_accepted 3) after 2 tokens");
  r = right();
  r.conv_outside = {"after"};
  EXPECT_EQ(check(step(), r), "causal_conv1d_update wrote outside its state tensor (past the "
                              "end of it)");
  r = right();
  r.conv[1].rows[0] = {6, 2}; // the window read at offset a - 2
  EXPECT_EQ(check(step(), r),
            "causal_conv1d_update wrote row 0 of block 6 (entry 0 of row 1, window read at "
            "offset 2) with row 2 of block 6; expected row 3 of block 6");
  r = right();
  r.conv[0].rows[2] = {-3, 0};
  EXPECT_EQ(check(step(), r),
            "causal_conv1d_update wrote row 2 of block 3 (entry 0 of row 0, window read at "
            "offset 1) with a value from outside the state tensor; expected token 0 of the "
            "step");
  r = right();
  r.scan[0] = {9, -4, 4};
  EXPECT_EQ(check(step(), r),
            "selective_scan_fn wrote block 9 (prefill row 0) with the state of no block (zeros) "
            "after 4 tokens; expected the state of block 9 (the block of prefill row 0) after "
            "4 tokens");
}

// Row 0 probed with a count out of range: skipping it, or reading and writing within its window,
// agrees; a state read from another row's window (an unbounded count) is named.
TEST(ForwardKernelCheck, AProbeRowMayOnlyUseItsOwnWindow) {
  ForwardKernelStep s = step();
  s.kernels = {"ssm"};
  s.probe_row = 0;
  s.num_accepted[0] = 4;
  const ForwardKernelReport others{.ssm = {{6, 8, 1}, {7, 8, 2}}};
  EXPECT_EQ(check(s, others), "agree");
  ForwardKernelReport r = others;
  r.ssm.insert(r.ssm.end(), {{3, 3, 1}, {4, 3, 2}, {5, 3, 3}});
  EXPECT_EQ(check(s, r), "agree");
  r = others;
  r.ssm.insert(r.ssm.end(), {{3, 6, 1}, {4, 6, 2}});
  EXPECT_EQ(check(s, r),
            "selective_state_update wrote block 3 (entry 0 of row 0) with the state of block 6 "
            "(entry 0 of row 1) after 1 tokens: given num_accepted 4 for a window of 3 entries, "
            "it read outside the row's window instead of bounding the count");
  r = others;
  r.ssm.push_back({9, 3, 1}); // outside the probe row's window: as without a probe
  EXPECT_EQ(check(s, r),
            "selective_state_update wrote block 9 (the block of prefill row 0), which no row "
            "writes; it holds the state of block 3 (entry 0 of row 0) after 1 tokens");
}

// All mode: whole table rows. Decode rows read block_idx_last_computed's column and write
// block_idx_last_scheduled's; the scan writes each boundary's state from the first scheduled
// column and the final state to the last (B = 4; the adapter's test has the same rows).
TEST(ForwardKernelCheck, AllModeColumnsComeFromTheBlockIndices) {
  const ForwardKernelStep s{.kernels = {"ssm", "conv", "scan"},
                            .num_blocks = 12,
                            .state_len = 3,
                            .conv_width = 4,
                            .rows = 2,
                            .width = 3,
                            .state_indices = {3, 4, 5, 6, 7, -1},
                            .prefill_indices = {8, 9, 10, 11, 1, 2, -1, -1},
                            .prefill_initial = {1, 0},
                            .prefill_query_start_loc = {0, 10, 16},
                            .all_mode = true,
                            .block_size = 4,
                            .last_computed = {0, 1},
                            .last_scheduled = {1, 1},
                            .prefill_width = 4,
                            .prefill_first = {1, 0},
                            .prefill_last = {3, 1},
                            .prefill_last_computed = {0, 0},
                            .prefill_computed = {4, 0}};
  const ForwardKernelReport right{
      .ssm = {{4, 3, 1}, {7, 7, 1}},
      .conv = {{4, {{3, 1}, {3, 2}, {-1, 0}}}, {7, {{7, 1}, {7, 2}, {-1, 0}}}},
      .scan = {{9, 8, 4}, {10, 8, 8}, {11, 8, 10}, {1, -4, 4}, {2, -4, 6}}};
  EXPECT_EQ(check(s, right), "agree");
  ForwardKernelReport r = right;
  r.ssm[0] = {3, 3, 1}; // written back where it was read, as without prefix caching
  EXPECT_EQ(check(s, r),
            "selective_state_update wrote block 3 (entry 0 of row 0), which no row writes; it "
            "holds the state of block 3 (entry 0 of row 0) after 1 tokens");
  r = right;
  r.ssm[0] = {4, 4, 1};
  EXPECT_EQ(check(s, r),
            "selective_state_update wrote block 4 (entry 1 of row 0) with the state of block 4 "
            "(entry 1 of row 0) after 1 tokens; expected the state of block 3 (entry 0, "
            "block_idx_last_computed) after 1 tokens");
  r = right;
  r.conv[0].rows[0] = {4, 1};
  EXPECT_EQ(check(s, r),
            "causal_conv1d_update wrote row 0 of block 4 (entry 1 of row 0, window read at "
            "offset 0) with row 1 of block 4; expected row 1 of block 3");
  r = right;
  r.scan = {{8, 8, 10}, {9, 8, 4}, {10, 8, 8}, {1, -4, 4}, {2, -4, 6}};
  EXPECT_EQ(check(s, r),
            "selective_scan_fn wrote block 8 (entry 0 of prefill row 0), which no prefill row "
            "writes; it holds the state of block 8 (entry 0 of prefill row 0) after 10 tokens");
  r.scan.erase(r.scan.begin());
  EXPECT_EQ(check(s, r),
            "selective_scan_fn never wrote block 11 (entry 3 of prefill row 0): expected the "
            "state of block 8 (entry 0 of prefill row 0) after 10 tokens");
}

// Without spec decode: one token per row, read and written at entry 0.
TEST(ForwardKernelCheck, WithoutSpecDecodeEntryZeroOnly) {
  const ForwardKernelStep s{.kernels = {"ssm"},
                            .num_blocks = 8,
                            .rows = 2,
                            .width = 1,
                            .state_indices = {2, 0}};
  EXPECT_EQ(check(s, {.ssm = {{2, 2, 1}}}), "agree");
  EXPECT_EQ(check(s, {.ssm = {{2, 2, 1}, {0, 0, 1}}}),
            "selective_state_update wrote block 0 (the null block), which no row writes; it "
            "holds the state of block 0 (the null block) after 1 tokens");
  EXPECT_EQ(scan_tag(63), 64);
  EXPECT_EQ(scan_tag(64), 128);
  EXPECT_TRUE(scan_tracer_fits(4095, 63));
  EXPECT_FALSE(scan_tracer_fits(4096, 4095));
}

} // namespace
} // namespace mc::gpu::engine
