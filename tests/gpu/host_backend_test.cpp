// The host backend, kind by kind, against bytes worked out by hand from
// model/LAUNCH_KINDS.md. Arenas start poisoned, so a byte nobody should write shows.
#include "gpu/host_backend.h"
#include "tests/gpu/case_helpers.h"

#include <gtest/gtest.h>

namespace mc::gpu {
namespace {

using model::LaunchKind;
using test::expect_move;
using test::expect_same_arena;

// short_conv, dim 3, K 4: one conv state of 3 token rows x 3 fp16 = 18 bytes, page 24.
model::Layout short_conv_layout(model::ConvLayout layout, std::int32_t elem = 2) {
  return test::make_layout(
      {test::group_spec(model::Family::short_conv, {.intermediate_size = 3, .conv_kernel = 4}, 1,
                        elem, elem)},
      8, layout);
}

// mamba2, conv (3 rows x 8 fp16 = 48 bytes) and temporal (2x2x2 fp32 = 32 bytes), each in
// its own arena with a 64-byte block stride: the temporal copy moves 32 bytes, not 64.
model::Layout padded_mamba2_layout(std::int32_t layers = 1) {
  return test::small_mamba2_layout(model::PagePolicy::separate, layers);
}

// V1 postprocess inputs of one row, so that running = computed + scheduled - draft.
void set_v1_row(model::RequestArrays& r, std::int32_t running, std::int32_t a,
                std::int32_t state_idx) {
  r.num_accepted.push_back(a);
  r.state_idx.push_back(state_idx);
  r.num_computed.push_back(running - 2);
  r.num_scheduled.push_back(3);
  r.num_draft.push_back(1);
}

class SameBlockShift : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(SameBlockShift, SdConvRowsMoveLeftAsMemmove) {
  const std::int32_t bias = GetParam();
  model::LaunchCase c =
      test::make_case(short_conv_layout(model::ConvLayout::SD), LaunchKind::postprocess, 1, 6, 6);
  test::set_row(c, 0, {5, 3, 6, 7, 1, 2});
  // B 4: new = 8, running = 8 - bias, dst = 8/4 - 1 = 1 == state_idx: reset, copy in block 3.
  set_v1_row(c.requests, 8 - bias, bias + 1, 1);
  const model::LaunchResult r = run_launch_host(c);
  EXPECT_EQ(r.requests.num_accepted_out, std::vector<std::int32_t>{1});
  EXPECT_EQ(r.requests.num_accepted, std::vector<std::int32_t>{bias + 1});
  ASSERT_EQ(r.decisions.size(), 1u);
  const model::CopyDecision& d = r.decisions[0];
  EXPECT_EQ(d.src_col, 1);
  EXPECT_EQ(d.dst_col, 1);
  EXPECT_EQ(d.token_bias, bias);
  EXPECT_EQ(d.src_block_id, 3);
  EXPECT_EQ(d.dst_block_id, 3);
  EXPECT_EQ(d.src_byte_offset, bias * 6);
  EXPECT_EQ(d.bytes, (3 - bias) * 6); // bias 3 == w: an empty slice, still recorded
  model::Arena expected = c.arenas[0].clone();
  expect_move(expected, c.arenas[0], 3 * 24, 3 * 24 + bias * 6, (3 - bias) * 6);
  expect_same_arena(r.arenas[0], expected);
}

TEST_P(SameBlockShift, DsConvRowTailsMoveLeftAsMemmove) {
  const std::int32_t bias = GetParam();
  model::LaunchCase c =
      test::make_case(short_conv_layout(model::ConvLayout::DS), LaunchKind::postprocess, 1, 6, 6);
  test::set_row(c, 0, {5, 3, 6, 7, 1, 2});
  set_v1_row(c.requests, 8 - bias, bias + 1, 1);
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.decisions.size(), 1u);
  EXPECT_EQ(r.decisions[0].src_byte_offset, bias * 2);
  EXPECT_EQ(r.decisions[0].bytes, 3 * (3 - bias) * 2);
  model::Arena expected = c.arenas[0].clone();
  for (std::int64_t row = 0; row < 3; ++row) // dim rows of 3 fp16 = 6 bytes
    expect_move(expected, c.arenas[0], 72 + row * 6, 72 + row * 6 + bias * 2, (3 - bias) * 2);
  expect_same_arena(r.arenas[0], expected);
}

INSTANTIATE_TEST_SUITE_P(Bias, SameBlockShift, ::testing::Values(1, 2, 3));

TEST(HostPostprocess, CrossingCopiesConvShiftAndTemporalColumnOfNaturalSize) {
  model::LaunchCase c = test::make_case(padded_mamba2_layout(), LaunchKind::postprocess, 2, 6, 9);
  test::set_row(c, 0, {1, 2, 3, 4, 5, 6});
  test::set_row(c, 1, {7, 0, 0, 0, 0, 0});
  set_v1_row(c.requests, 6, 3, 0); // new 8: dst 1, bias 2, src 0: no reset
  set_v1_row(c.requests, 5, 2, 0); // new 6, aligned 4 < 5: nothing
  const model::LaunchResult r = run_launch_host(c);
  EXPECT_EQ(r.requests.num_accepted_out, (std::vector<std::int32_t>{3, 2}));
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].tensor, 0);
  EXPECT_EQ(r.decisions[0].src_block_id, 1);
  EXPECT_EQ(r.decisions[0].dst_block_id, 2);
  EXPECT_EQ(r.decisions[1].tensor, 1);
  EXPECT_EQ(r.decisions[1].src_block_id, 3); // bt(src + bias)
  EXPECT_EQ(r.decisions[1].src_byte_offset, 0);
  EXPECT_EQ(r.decisions[1].bytes, 32);
  model::Arena conv = c.arenas[0].clone();
  expect_move(conv, c.arenas[0], 2 * 64, 1 * 64 + 2 * 16, 16); // rows 2.. of block 1
  expect_same_arena(r.arenas[0], conv);
  model::Arena temporal = c.arenas[1].clone();
  expect_move(temporal, c.arenas[1], 2 * 64, 3 * 64, 32); // 32 natural bytes, not 64
  expect_same_arena(r.arenas[1], temporal);
}

TEST(HostPostprocessAlign, DecidesFromLaunchTimeAcceptedAndSkipsMinusOne) {
  model::LaunchCase c =
      test::make_case(padded_mamba2_layout(2), LaunchKind::postprocess_align, 2, 6, 6);
  c.num_slots = 3;
  test::set_row(c, 0, {1, 2, 3, 4, 5, 6});
  c.requests.idx_mapping = {2, -1};
  // slot 2: a 3, new 8: running 6, dst 1 == state_idx 1, bias 2. Were a re-read after the
  // reset (a = 1), running would be 8, bias 0 and nothing copied: every state must copy.
  c.requests.num_accepted = {2, 2, 3};
  c.requests.new_num_computed = {8, 8, 8};
  c.requests.state_idx = {0, 0, 1};
  const model::LaunchResult r = run_launch_host(c);
  EXPECT_EQ(r.requests.num_accepted, (std::vector<std::int32_t>{2, 2, 1}));
  ASSERT_EQ(r.decisions.size(), 4u);
  for (std::int32_t t = 0; t < 4; ++t) {
    EXPECT_EQ(r.decisions[static_cast<std::size_t>(t)].tensor, t);
    EXPECT_EQ(r.decisions[static_cast<std::size_t>(t)].slot, 2);
    EXPECT_EQ(r.decisions[static_cast<std::size_t>(t)].token_bias, 2);
  }
  for (std::size_t arena = 0; arena < 4; ++arena) {
    model::Arena expected = c.arenas[arena].clone();
    if (arena % 2 == 0) {
      expect_move(expected, c.arenas[arena], 2 * 64, 2 * 64 + 2 * 16, 16); // same block
    } else {
      expect_move(expected, c.arenas[arena], 2 * 64, 4 * 64, 32); // bt(1 + 2) -> bt(1)
    }
    expect_same_arena(r.arenas[arena], expected);
  }
}

// The racy mutant on the host: the same case as above (2 rows x 4 tensors of one unit, so
// the host runs 8 programs and the copying row's 4 units go to programs 0..3, one each).
// Program 0 holds the row's first tensor: it decides, then resets a; programs 1..3 run after
// it and decide from a = 1, copying nothing. One fixed schedule: the same wrong result on
// every run, never the clean one.
TEST(HostPostprocessAlign, RacyResetMutantLosesTheLaterProgramsCopiesOnEveryRun) {
  model::LaunchCase c =
      test::make_case(padded_mamba2_layout(2), LaunchKind::postprocess_align, 2, 6, 6);
  c.num_slots = 3;
  test::set_row(c, 0, {1, 2, 3, 4, 5, 6});
  c.requests.idx_mapping = {2, -1};
  c.requests.num_accepted = {2, 2, 3};
  c.requests.new_num_computed = {8, 8, 8};
  c.requests.state_idx = {0, 0, 1};
  const model::LaunchResult clean = run_launch_host(c);
  ASSERT_EQ(clean.decisions.size(), 4u);
  for (int run = 0; run < 3; ++run) {
    const model::LaunchResult r = run_launch_host(c, Mutant::reset_races_other_programs);
    EXPECT_EQ(r.requests.num_accepted, clean.requests.num_accepted) << "the reset is written";
    ASSERT_EQ(r.decisions.size(), 1u) << run;
    EXPECT_EQ(r.decisions[0], clean.decisions[0]);
    expect_same_arena(r.arenas[0], clean.arenas[0]); // tensor 0: program 0's own copy
    for (std::size_t arena = 1; arena < 4; ++arena)
      expect_same_arena(r.arenas[arena], c.arenas[arena]); // never copied
  }
}

// One tensor of one unit: a single program copies the row, nobody reads a after the
// reset, and the mutant does what the clean kernels do.
TEST(HostPostprocessAlign, RacyResetMutantHoldsWhenOneProgramCopiesTheRow) {
  model::LaunchCase c = test::make_case(short_conv_layout(model::ConvLayout::SD),
                                        LaunchKind::postprocess_align, 1, 6, 6);
  test::set_row(c, 0, {5, 3, 6, 7, 1, 2});
  c.requests.idx_mapping = {0};
  c.requests.num_accepted = {3}; // running 6, new 8: dst 1 == state_idx, bias 2
  c.requests.new_num_computed = {8};
  c.requests.state_idx = {1};
  const model::LaunchResult clean = run_launch_host(c);
  const model::LaunchResult r = run_launch_host(c, Mutant::reset_races_other_programs);
  EXPECT_EQ(r.requests.num_accepted, std::vector<std::int32_t>{1});
  EXPECT_EQ(r.decisions, clean.decisions);
  ASSERT_EQ(r.decisions.size(), 1u);
  EXPECT_EQ(r.decisions[0].token_bias, 2);
  expect_same_arena(r.arenas[0], clean.arenas[0]);
}

TEST(HostPrecopy, CopiesByBatchRowTablesAndSkipsFreshAndSameColumn) {
  model::LaunchCase c = test::make_case(padded_mamba2_layout(), LaunchKind::precopy, 3, 4, 7);
  test::set_row(c, 0, {1, 2, 3, 0});
  test::set_row(c, 1, {4, 5, 6, 0});
  test::set_row(c, 2, {7, 5, 6, 0});
  c.requests.idx_mapping = {1, 0, 2};
  c.requests.src_col = {-1, 0, 2};
  c.requests.state_idx = {1, 2, 2};
  c.requests.token_bias = {0, 1, 0};
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].batch_row, 0);
  EXPECT_EQ(r.decisions[0].slot, 1);
  EXPECT_EQ(r.decisions[1].src_block_id, 2); // row 0, column 0 + 1
  EXPECT_EQ(r.decisions[1].dst_block_id, 3);
  EXPECT_EQ(r.requests, c.requests);
  model::Arena conv = c.arenas[0].clone();
  expect_move(conv, c.arenas[0], 3 * 64, 1 * 64 + 16, 32);
  expect_same_arena(r.arenas[0], conv);
  model::Arena temporal = c.arenas[1].clone();
  expect_move(temporal, c.arenas[1], 3 * 64, 2 * 64, 32);
  expect_same_arena(r.arenas[1], temporal);
}

// vLLM's V1 fused pre-copy: no idx_mapping (a null pointer the kernels never read), rows are
// slots and table rows; row 0 is marked as copying nothing (-1, bias 0).
TEST(HostPrecopyV1, RowsIndexArraysAndTablesDirectly) {
  model::LaunchCase c = test::make_case(padded_mamba2_layout(), LaunchKind::precopy_v1, 2, 4, 7);
  test::set_row(c, 0, {1, 2, 3, 0});
  test::set_row(c, 1, {4, 5, 6, 0});
  c.requests.src_col = {-1, 0};
  c.requests.state_idx = {1, 1};
  c.requests.token_bias = {0, 2};
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].batch_row, 1);
  EXPECT_EQ(r.decisions[0].slot, 1);
  EXPECT_EQ(r.decisions[0].src_block_id, 4);
  EXPECT_EQ(r.decisions[0].dst_block_id, 5);
  EXPECT_EQ(r.decisions[1].src_block_id, 6); // temporal: column 0 + 2
  EXPECT_EQ(r.requests, c.requests);
  model::Arena conv = c.arenas[0].clone();
  expect_move(conv, c.arenas[0], 5 * 64, 4 * 64 + 32, 16); // token 2 of 3 rows of 16 bytes
  expect_same_arena(r.arenas[0], conv);
  model::Arena temporal = c.arenas[1].clone();
  expect_move(temporal, c.arenas[1], 5 * 64, 6 * 64, 32);
  expect_same_arena(r.arenas[1], temporal);
}

// Per-slot tables (#55506): batch row 0 has slot 2 and reads table row 2; row 1 (slot 0) is
// fresh. Table row 1 belongs to a free slot.
model::LaunchCase slot_tables_case() {
  model::LaunchCase c =
      test::make_case(padded_mamba2_layout(), LaunchKind::precopy_slot_tables, 2, 4, 7);
  c.num_slots = 3;
  for (model::BlockTable& t : c.block_tables.groups)
    t = model::BlockTable::make(3, 4, 7);
  test::set_row(c, 0, {1, 2, 3, 0});
  test::set_row(c, 1, {4, 5, 6, 0});
  test::set_row(c, 2, {7, 6, 5, 0});
  c.requests.idx_mapping = {2, 0};
  c.requests.src_col = {-1, 3, 0};
  c.requests.state_idx = {0, 3, 1};
  c.requests.token_bias = {0, 3, 2};
  return c;
}

TEST(HostPrecopySlotTables, FindsEachRowsTableAtItsSlot) {
  const model::LaunchCase c = slot_tables_case();
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].batch_row, 0);
  EXPECT_EQ(r.decisions[0].slot, 2);
  EXPECT_EQ(r.decisions[0].src_block_id, 7);
  EXPECT_EQ(r.decisions[0].dst_block_id, 6);
  EXPECT_EQ(r.decisions[1].src_block_id, 5); // temporal: column 0 + 2
  EXPECT_EQ(r.decisions[1].dst_block_id, 6);
  EXPECT_EQ(r.requests, c.requests);
  model::Arena conv = c.arenas[0].clone();
  expect_move(conv, c.arenas[0], 6 * 64, 7 * 64 + 32, 16);
  expect_same_arena(r.arenas[0], conv);
  model::Arena temporal = c.arenas[1].clone();
  expect_move(temporal, c.arenas[1], 6 * 64, 5 * 64, 32);
  expect_same_arena(r.arenas[1], temporal);
}

TEST(HostPrecopySlotTables, BatchRowMutantReadsAnotherRequestsRow) {
  const model::LaunchCase c = slot_tables_case();
  const model::LaunchResult r = run_launch_host(c, Mutant::slot_table_row_from_batch_row);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].slot, 2);
  EXPECT_EQ(r.decisions[0].src_block_id, 1); // table row 0: slot 0's request
  EXPECT_EQ(r.decisions[0].dst_block_id, 2);
  EXPECT_EQ(r.decisions[1].src_block_id, 3);
}

TEST(HostPreprocessAlign, BookkeepingPerSlotAndUntouchedSlots) {
  model::LaunchCase c =
      test::make_case(padded_mamba2_layout(), LaunchKind::preprocess_align, 4, 4, 4);
  c.num_slots = 4;
  c.requests.idx_mapping = {3, -1, 0, 2};
  c.requests.query_start_loc = {0, 3, 5, 6, 10};
  c.requests.state_idx = {1, 9, -1, 1};
  c.requests.num_computed = {8, 9, 0, 5};
  c.requests.num_accepted = {2, 4, 1, 3};
  c.requests.src_col = {77, 77, 77, 77};
  c.requests.token_bias = {77, 77, 77, 77};
  const model::LaunchResult r = run_launch_host(c);
  // slot 3: qlen 3, 5 + 3 = 8 -> column 1, unchanged: a stays 3.
  // slot 0: qlen 1, 8 + 1 = 9 -> column 2, changed from 1: a = 1.
  // slot 2: qlen 4, 0 + 4 = 4 -> column 0, old -1: a stays 1.
  EXPECT_EQ(r.requests.state_idx, (std::vector<std::int32_t>{2, 9, 0, 1}));
  EXPECT_EQ(r.requests.num_accepted, (std::vector<std::int32_t>{1, 4, 1, 3}));
  EXPECT_EQ(r.requests.src_col, (std::vector<std::int32_t>{1, 77, -1, 1}));
  EXPECT_EQ(r.requests.token_bias, (std::vector<std::int32_t>{1, 77, 0, 2}));
  EXPECT_TRUE(r.decisions.empty());
  for (std::size_t i = 0; i < c.arenas.size(); ++i)
    expect_same_arena(r.arenas[i], c.arenas[i]);
}

TEST(HostBatchCopy, FlatCopySpecsIncludingSameBlockShift) {
  model::LaunchCase c = test::make_case(padded_mamba2_layout(), LaunchKind::batch_copy, 3, 4, 5);
  test::set_row(c, 0, {1, 2, 3, 0});
  test::set_row(c, 1, {6, 6, 0, 0});
  c.requests.src_col = {0, 0, -1};
  c.requests.state_idx = {2, 1, 1};
  c.requests.token_bias = {1, 1, 0};
  const model::LaunchResult r = run_launch_host(c);
  ASSERT_EQ(r.status, model::LaunchStatus::ok);
  ASSERT_EQ(r.decisions.size(), 4u);
  EXPECT_EQ(r.decisions[2].batch_row, 1);
  EXPECT_EQ(r.decisions[2].src_block_id, 6);
  EXPECT_EQ(r.decisions[2].dst_block_id, 6);
  model::Arena conv = c.arenas[0].clone();
  expect_move(conv, c.arenas[0], 3 * 64, 1 * 64 + 16, 32);
  expect_move(conv, c.arenas[0], 6 * 64, 6 * 64 + 16, 32); // same block: memmove
  expect_same_arena(r.arenas[0], conv);
  model::Arena temporal = c.arenas[1].clone();
  expect_move(temporal, c.arenas[1], 3 * 64, 2 * 64, 32);
  expect_same_arena(r.arenas[1], temporal); // row 1: bt(0 + 1) == bt(1): onto itself
}

TEST(HostBatchCopy, DsWithBiasIsUnsupportedAndTouchesNothing) {
  model::LaunchCase c =
      test::make_case(short_conv_layout(model::ConvLayout::DS), LaunchKind::batch_copy, 2, 4, 4);
  test::set_row(c, 0, {1, 2, 3, 0});
  test::set_row(c, 1, {4, 5, 3, 0});
  c.requests.src_col = {0, 0};
  c.requests.state_idx = {1, 1};
  c.requests.token_bias = {0, 1};
  const model::LaunchResult r = run_launch_host(c);
  EXPECT_EQ(r.status, model::LaunchStatus::unsupported);
  EXPECT_NE(r.unsupported_reason.find("request 1 tensor 0"), std::string::npos);
  EXPECT_TRUE(r.decisions.empty());
  EXPECT_EQ(r.requests, c.requests);
  expect_same_arena(r.arenas[0], c.arenas[0]);
  c.requests.token_bias = {0, 0}; // bias 0: the whole natural block, flat
  const model::LaunchResult ok = run_launch_host(c);
  ASSERT_EQ(ok.status, model::LaunchStatus::ok);
  model::Arena expected = c.arenas[0].clone();
  expect_move(expected, c.arenas[0], 2 * 24, 1 * 24, 18);
  expect_move(expected, c.arenas[0], 5 * 24, 4 * 24, 18);
  expect_same_arena(ok.arenas[0], expected);
}

class ElementSize : public ::testing::TestWithParam<std::int32_t> {};

TEST_P(ElementSize, PrecopySdShiftBetweenBlocks) {
  const std::int32_t elem = GetParam();
  model::LaunchCase c =
      test::make_case(short_conv_layout(model::ConvLayout::SD, elem), LaunchKind::precopy, 1, 3, 3);
  test::set_row(c, 0, {6, 1, 0});
  c.requests.idx_mapping = {0};
  c.requests.src_col = {0};
  c.requests.state_idx = {1};
  c.requests.token_bias = {1};
  const model::LaunchResult r = run_launch_host(c);
  const std::int64_t page = (9 * elem + 7) / 8 * 8;
  model::Arena expected = c.arenas[0].clone();
  expect_move(expected, c.arenas[0], 1 * page, 6 * page + 3 * elem, 6 * elem);
  expect_same_arena(r.arenas[0], expected);
}

INSTANTIATE_TEST_SUITE_P(Bytes, ElementSize, ::testing::Values(2, 4, 8));

TEST(HostBackend, InvalidColumnIsAnInputError) {
  model::LaunchCase c = test::make_case(padded_mamba2_layout(), LaunchKind::precopy, 1, 3, 3);
  test::set_row(c, 0, {1, 2, -1});
  c.requests.idx_mapping = {0};
  c.requests.src_col = {0};
  c.requests.state_idx = {2}; // a pad slot
  c.requests.token_bias = {0};
  EXPECT_THROW(run_launch_host(c), model::InputError);
}

} // namespace
} // namespace mc::gpu
