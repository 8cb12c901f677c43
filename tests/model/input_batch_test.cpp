// InputBatchRows (model/input_batch.h): vLLM V1's persistent rows, removal, reuse of the lowest
// holes, condense().
#include "model/input_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using mc::model::InputBatchRows;

std::vector<std::string> rows_of(const InputBatchRows& b) {
  std::vector<std::string> out;
  for (std::int32_t i = 0; i < b.size(); ++i)
    out.push_back(b.at(i));
  return out;
}

TEST(InputBatchRows, NewRequestsAppendInOrder) {
  InputBatchRows b;
  const std::vector<std::string> ids{"a", "b", "c"};
  b.update(ids);
  EXPECT_EQ(rows_of(b), ids);
  EXPECT_EQ(b.row_of("c"), 2);
  EXPECT_EQ(b.row_of("z"), -1);
  EXPECT_EQ(b.at(3), "");
}

// a finishes and nothing new comes: condense() moves d, the last row, into a's hole; b and c
// stay. The row d's count was written at is 3, the row it reads from now 0.
TEST(InputBatchRows, CondenseMovesTheLastRowIntoAHole) {
  InputBatchRows b;
  const std::vector<std::string> first{"a", "b", "c", "d"};
  b.update(first);
  const std::vector<std::string> second{"b", "c", "d"};
  b.update(second);
  EXPECT_EQ(rows_of(b), (std::vector<std::string>{"d", "b", "c"}));
  EXPECT_EQ(b.row_of("d"), 0);
  EXPECT_EQ(b.row_of("a"), -1);
}

// A new request takes the lowest hole before condense() fills the others from the end.
TEST(InputBatchRows, NewRequestsTakeTheLowestHoleFirst) {
  InputBatchRows b;
  const std::vector<std::string> first{"a", "b", "c", "d", "e"};
  b.update(first);
  const std::vector<std::string> second{"e", "x", "d"}; // a, b and c leave; x is new
  b.update(second);
  EXPECT_EQ(rows_of(b), (std::vector<std::string>{"x", "e", "d"}));
  EXPECT_EQ(b.row_of("x"), 0);
  EXPECT_EQ(b.row_of("e"), 1);
  EXPECT_EQ(b.row_of("d"), 2);
  const std::vector<std::string> none;
  b.update(none);
  EXPECT_EQ(b.size(), 0);
}

} // namespace
