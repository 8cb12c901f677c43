// Invalid inputs are InputErrors naming request row, tensor and the bad index
// (LAUNCH_KINDS.md, "Validity"); valid but unusual inputs are not.
#include "in_place_check.h"
#include "oracle/launch.h"
#include "oracle_test_util.h"

#include "model/errors.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace mc::oracle {
namespace {

using model::LaunchKind;
using test_util::make_case;
using test_util::set_row;

// Two V2 precopy rows, both copying column 0 -> 1 with bias 1, on disjoint blocks.
model::LaunchCase valid_precopy() {
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::precopy, 2, 3, 4, 6);
  set_row(c, 0, 0, {1, 2, 3, 4});
  set_row(c, 0, 1, {5, 6, 7, 8});
  c.requests = {.idx_mapping = {2, 0},
                .state_idx = {1, 0, 1},
                .src_col = {0, -1, 0},
                .token_bias = {1, 0, 1}};
  c.requests.src_col[0] = 0; // slot 0 (row 1) copies too; slot 1 is in no row
  c.requests.state_idx[0] = 1;
  c.requests.token_bias[0] = 1;
  return c;
}

// Runs `mutate` on a valid case and expects an InputError whose message holds every needle.
void expect_input_error(const std::function<void(model::LaunchCase&)>& mutate,
                        const std::vector<std::string>& needles) {
  model::LaunchCase c = valid_precopy();
  ASSERT_NO_THROW(test_util::run_launch_checked(c));
  mutate(c);
  try {
    test_util::run_launch_checked(c);
    ADD_FAILURE() << "no InputError";
  } catch (const model::InputError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << message << "\n  lacks: " << needle;
  }
}

TEST(Validate, ColumnOutsideTheRow) {
  expect_input_error([](model::LaunchCase& c) { c.requests.state_idx[2] = 4; },
                     {"request row 0 (slot 2)", "tensor 0 (group 0 'hand', layer 0, state 0",
                      "dst column 4", "[0, 4)"});
}

TEST(Validate, TemporalColumnPlusBiasOutsideTheRow) {
  expect_input_error(
      [](model::LaunchCase& c) {
        c.requests.src_col[0] = 2;
        c.requests.state_idx[0] = 3;
        c.requests.token_bias[0] = 2; // conv reads column 2; temporal reads column 4
      },
      {"request row 1 (slot 0)", "tensor 1", "state 1 'temporal'", "src column 4"});
}

TEST(Validate, PadSlotStrideGapAndOutOfRangeBlockIds) {
  expect_input_error([](model::LaunchCase& c) { c.block_tables.groups[0].at(0, 0) = -1; },
                     {"request row 0", "tensor 0", "src column 0", "block id -1"});
  expect_input_error(
      [](model::LaunchCase& c) { c.block_tables.groups[0].at(1, 1) = model::kStrideGapFill; },
      {"request row 1", "dst column 1", fmt::format("block id {}", model::kStrideGapFill)});
  expect_input_error([](model::LaunchCase& c) { c.block_tables.groups[0].at(0, 1) = 16; },
                     {"request row 0", "block id 16", "[0, 16)"});
}

TEST(Validate, NegativeTokenBias) {
  expect_input_error([](model::LaunchCase& c) { c.requests.token_bias[2] = -1; },
                     {"request row 0", "token bias -1"});
}

TEST(Validate, IdxMapping) {
  expect_input_error(
      [](model::LaunchCase& c) {
        c.requests.idx_mapping = {2, 2};
      },
      {"request rows 0 and 1", "slot 2"});
  expect_input_error(
      [](model::LaunchCase& c) {
        c.requests.idx_mapping = {3, 0};
      },
      {"request row 0", "slot 3", "[-1, 3)"});
  expect_input_error(
      [](model::LaunchCase& c) {
        c.requests.idx_mapping = {0, -2};
      },
      {"request row 1", "slot -2"});
}

TEST(Validate, RacingCopiesOfDifferentRequests) {
  // Both rows write block 2 (row 1's column 1 now holds it).
  expect_input_error([](model::LaunchCase& c) { c.block_tables.groups[0].at(1, 1) = 2; },
                     {"request rows 0 and 1", "race", "block 2"});
  // Row 1 writes block 1, which row 0 reads.
  expect_input_error([](model::LaunchCase& c) { c.block_tables.groups[0].at(1, 1) = 1; },
                     {"race", "block 1", "reads"});
}

TEST(Validate, DisjointSlicesOfOneBlockDoNotRace) {
  // Row 0 reads conv tokens [2, 3) of block 5; row 1 writes conv tokens [0, 1) of block 5
  // (the temporal states of block 5 are another tensor): no byte is shared.
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::precopy, 2, 2, 4, 4);
  set_row(c, 0, 0, {5, 6, 7, 8});
  set_row(c, 0, 1, {9, 5, 10, 11});
  c.requests = {
      .idx_mapping = {0, 1}, .state_idx = {1, 1}, .src_col = {0, 0}, .token_bias = {2, 2}};
  EXPECT_NO_THROW(test_util::run_launch_checked(c));
  c.requests.token_bias = {1, 1}; // now row 0 reads tokens [1, 3) and row 1 writes [0, 2)
  EXPECT_THROW(test_util::run_launch_checked(c), model::InputError);
}

TEST(Validate, SharedSourceBlocksAreReadOnlyAndFine) {
  model::LaunchCase c = valid_precopy();
  c.block_tables.groups[0].at(1, 0) = 1; // both rows read block 1 (column 0)
  c.block_tables.groups[0].at(1, 1) = 9;
  EXPECT_NO_THROW(test_util::run_launch_checked(c));
}

TEST(Validate, ArrayLengths) {
  expect_input_error([](model::LaunchCase& c) { c.requests.src_col.pop_back(); },
                     {"array src_col", "2 entries", "expected 3"});
  expect_input_error([](model::LaunchCase& c) { c.requests.idx_mapping.push_back(1); },
                     {"idx_mapping", "3 entries", "expected 2"});
  expect_input_error([](model::LaunchCase& c) { c.kind = LaunchKind::preprocess_align; },
                     {"array num_accepted", "0 entries", "expected 3"});
  expect_input_error([](model::LaunchCase& c) { c.kind = LaunchKind::batch_copy; },
                     {"num_slots 3 must equal num_reqs 2"});
  expect_input_error(
      [](model::LaunchCase& c) {
        c.kind = LaunchKind::batch_copy;
        c.num_slots = 2;
      },
      {"idx_mapping", "expected 0"});
}

TEST(Validate, ArenasAndBlockTablesMatchTheLayout) {
  expect_input_error([](model::LaunchCase& c) { c.arenas.pop_back(); }, {"0 arenas given"});
  expect_input_error([](model::LaunchCase& c) { c.arenas[0] = model::Arena(64); },
                     {"arena 0 holds 64 bytes"});
  expect_input_error([](model::LaunchCase& c) { c.block_tables.groups.clear(); },
                     {"0 block tables"});
  expect_input_error(
      [](model::LaunchCase& c) { c.block_tables.groups[0] = model::BlockTable::make(1, 4, 6); },
      {"1 rows for 2 request rows"});
  expect_input_error([](model::LaunchCase& c) { c.block_tables.groups[0].block_ids.pop_back(); },
                     {"11 ids"});
}

TEST(Validate, PostprocessDestinationBeforeTheFirstColumn) {
  // Nothing computed or scheduled: running 0, new 0, aligned 0 >= 0, dst column -1.
  model::LaunchCase c = make_case(test_util::hand_layout(), LaunchKind::postprocess, 1, 1, 4, 4);
  set_row(c, 0, 0, {1, 2, 3, 4});
  c.requests = {.num_accepted = {1},
                .state_idx = {0},
                .num_scheduled = {0},
                .num_computed = {0},
                .num_draft = {0}};
  try {
    test_util::run_launch_checked(c);
    ADD_FAILURE() << "no InputError";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dst column -1"), std::string::npos) << e.what();
  }
}

TEST(Validate, TheCaseIsNotModified) {
  model::LaunchCase c = valid_precopy();
  test_util::fill_blocks(c, 0, {1, 5});
  const model::LaunchCase before = c.clone();
  const model::LaunchResult r = test_util::run_launch_checked(c);
  EXPECT_EQ(c.requests, before.requests);
  EXPECT_EQ(c.block_tables, before.block_tables);
  EXPECT_EQ(c.arenas[0].first_difference(before.arenas[0]), -1);
  EXPECT_NE(r.arenas[0].first_difference(before.arenas[0]), -1);
}

} // namespace
} // namespace mc::oracle

namespace mc::oracle {
namespace {

// Row 0 decides a reset of its a (an output) and a copy; row 2 then reads a pad block id, an
// InputError found only when the table is read. In place, nothing may have been written.
TEST(Validate, InPlaceLeavesAnInvalidCaseUntouched) {
  model::LaunchCase c =
      make_case(test_util::hand_layout(), LaunchKind::postprocess_align, 3, 4, 4, 4);
  set_row(c, 0, 0, {5, 6, 7, -1});
  set_row(c, 0, 2, {-1, 10, 11, -1}); // dst column 0 holds a pad
  test_util::fill_blocks(c, 0, {6, 7, 10});
  test_util::fill_blocks(c, 1, {6, 7, 10});
  c.requests = {.idx_mapping = {2, -1, 0},
                .num_accepted = {2, 3, 2, 1},
                .state_idx = {1, 2, 1, 0},
                .new_num_computed = {5, 9, 8, 8}};
  const model::LaunchCase before = c.clone();
  try {
    run_launch_in_place(c);
    ADD_FAILURE() << "no InputError";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dst column 0 holds block id -1"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(c.requests, before.requests);
  EXPECT_EQ(c.block_tables, before.block_tables);
  EXPECT_EQ(c.arenas[0].first_difference(before.arenas[0]), -1);
  // The same case without the pad runs, resets row 0's a and copies, in place.
  set_row(c, 0, 2, {9, 10, 11, -1});
  const model::LaunchResult r = run_launch_in_place(c);
  EXPECT_EQ(c.requests.num_accepted, (std::vector<std::int32_t>{2, 3, 1, 1}));
  EXPECT_EQ(r.decisions.size(), 4u);
  EXPECT_TRUE(r.arenas.empty());
  EXPECT_NE(c.arenas[0].first_difference(before.arenas[0]), -1);
}

} // namespace
} // namespace mc::oracle
