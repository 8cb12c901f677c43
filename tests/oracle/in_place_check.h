// run_launch and run_launch_in_place side by side: every oracle test case runs through both
// (launch.h promises one code path; this holds it to that).
#pragma once

#include "model/errors.h"
#include "model/launch.h"
#include "oracle/launch.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace mc::oracle::test_util {

// run_launch's result, after checking that run_launch_in_place on a clone of the case gives
// the same status, reason, arrays, decisions and arena bytes (its own result carrying no
// arrays and no arenas). When run_launch throws an InputError, the in-place run must throw
// the same message and leave its case untouched (arrays, tables, every arena byte); the
// error is then rethrown.
inline model::LaunchResult run_launch_checked(const model::LaunchCase& c) {
  model::LaunchCase in_place = c.clone();
  model::LaunchResult want;
  try {
    want = run_launch(c);
  } catch (const model::InputError& e) {
    try {
      run_launch_in_place(in_place);
      ADD_FAILURE() << "run_launch_in_place accepted a case run_launch rejects: " << e.what();
    } catch (const model::InputError& in_place_error) {
      EXPECT_EQ(std::string(in_place_error.what()), std::string(e.what()));
    }
    EXPECT_EQ(in_place.requests, c.requests) << "an invalid case had its arrays changed";
    EXPECT_EQ(in_place.block_tables, c.block_tables);
    EXPECT_EQ(in_place.arenas.size(), c.arenas.size());
    for (std::size_t i = 0; i < c.arenas.size() && i < in_place.arenas.size(); ++i)
      EXPECT_EQ(in_place.arenas[i].first_difference(c.arenas[i]), -1)
          << "an invalid case had arena " << i << " changed";
    throw;
  }
  const model::LaunchResult got = run_launch_in_place(in_place);
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.unsupported_reason, want.unsupported_reason);
  EXPECT_EQ(got.decisions, want.decisions);
  EXPECT_TRUE(got.arenas.empty());
  EXPECT_EQ(got.requests, model::RequestArrays{});
  EXPECT_EQ(in_place.requests, want.requests);
  EXPECT_EQ(in_place.block_tables, c.block_tables);
  EXPECT_EQ(in_place.arenas.size(), want.arenas.size());
  for (std::size_t i = 0; i < want.arenas.size() && i < in_place.arenas.size(); ++i)
    EXPECT_EQ(in_place.arenas[i].first_difference(want.arenas[i]), -1) << "arena " << i;
  return want;
}

} // namespace mc::oracle::test_util
