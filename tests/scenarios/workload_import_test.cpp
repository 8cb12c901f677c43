// The workload importer (scenarios/workload_import.h): arrivals by the step clock, prompts from
// hash blocks, lengths, and bad lines named by file, line and field. tests/harness/replay_test.cpp
// runs an imported workload through the simulator.
#include "model/errors.h"
#include "scenarios/workload_import.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mc::scenarios {
namespace {

// Arrivals by the step clock, prompts from hash blocks, output lengths (hand-checked).
TEST(WorkloadImport, ArrivalsPrefixesAndLengths) {
  std::istringstream in(
      R"({"timestamp": 1000, "input_length": 10, "output_length": 3, "hash_ids": [7, 8]})"
      "\n"
      R"({"timestamp": 1250.5, "input_length": 6, "output_length": 1, "hash_ids": [7, 9]})"
      "\n"
      "\n"
      R"({"timestamp": 1100, "input_length": 3, "output_length": 2, "extra": "ignored"})"
      "\n");
  const auto reqs = import_workload(
      in, "w.jsonl",
      {.step_ms = 100, .hash_block_tokens = 4, .vocab_size = 1000, .slack_tokens = 2});
  ASSERT_EQ(reqs.size(), 3u);
  // Sorted by timestamp: line 1 (t 1000 -> step 0), line 4 (1100 -> 1), line 2 (1250.5 -> 2).
  EXPECT_EQ(reqs[0].req_id, "w1");
  EXPECT_EQ(reqs[1].req_id, "w4");
  EXPECT_EQ(reqs[2].req_id, "w2");
  EXPECT_EQ(reqs[0].arrival_step, 0);
  EXPECT_EQ(reqs[1].arrival_step, 1);
  EXPECT_EQ(reqs[2].arrival_step, 2);
  EXPECT_EQ(reqs[0].num_prompt_tokens, 10);
  EXPECT_EQ(reqs[0].max_len, 13);
  EXPECT_EQ(reqs[0].tokens.size(), 15u); // max_len + slack
  EXPECT_EQ(reqs[2].max_len, 7);
  // Hash id 7 is the first block of w1 and w2: tokens 0..3 equal, and the block's tokens.
  for (std::int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(reqs[0].tokens[static_cast<std::size_t>(i)], hash_block_token(7, i, 1000));
    EXPECT_EQ(reqs[0].tokens[static_cast<std::size_t>(i)],
              reqs[2].tokens[static_cast<std::size_t>(i)]);
  }
  // Second blocks differ (8 vs 9); w1 tokens 4..7 are block 8's, 8..9 its own.
  EXPECT_EQ(reqs[0].tokens[4], hash_block_token(8, 0, 1000));
  EXPECT_EQ(reqs[2].tokens[4], hash_block_token(9, 0, 1000));
  EXPECT_NE(reqs[0].tokens[4], reqs[2].tokens[4]);
  // Exact values of the token function (splitmix64 of the stream key, then of key + i).
  EXPECT_EQ(hash_block_token(7, 0, 1000), hash_block_token(7, 0, 1000));
  for (const auto& r : reqs)
    for (const std::int32_t t : r.tokens)
      EXPECT_TRUE(t >= 0 && t < 1000);
}

TEST(WorkloadImport, BadLinesNamed) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"timestamp\": 0, \"input_length\": 4",
       "w.jsonl:2: json: the JSON value is cut short: the line ends at column 34"},
      {R"({"timestamp": 1e400, "input_length": 4, "output_length": 1})",
       "w.jsonl:2: timestamp: the number 1e400 is too large"},
      {R"({"timestamp": 3, "input_length": 4, "output_length": 1} x)",
       "w.jsonl:2: json: text after the end of the JSON value, at column 57"},
      {R"({"timestamp": 3, "input_length": 4, "hash_ids": [1, x]})",
       "w.jsonl:2: hash_ids[1]: not valid JSON at column 53: invalid literal"},
      {std::string(R"({"timestamp": 3, "input_length": 4, "output_length": 1})") + '\0' + "x",
       "w.jsonl:2: line: a NUL byte at column 56 (not a text file)"},
      {R"({"input_length": 4, "output_length": 1})", "w.jsonl:2: timestamp: missing"},
      {R"({"timestamp": 3, "input_length": 4.5, "output_length": 1})",
       "w.jsonl:2: input_length: expected an integer"},
      {R"({"timestamp": 3, "input_length": 4, "output_length": 0})",
       "w.jsonl:2: output_length: 0 is outside"},
      {R"({"timestamp": -3, "input_length": 4, "output_length": 2})",
       "w.jsonl:2: timestamp: -3 is outside"},
      {R"({"timestamp": 3, "input_length": 4, "output_length": 2, "hash_ids": [1, -2]})",
       "w.jsonl:2: hash_ids[1]: expected a non-negative integer"},
      {R"([1, 2])", "w.jsonl:2: json: expected an object"},
  };
  for (const auto& [line, want] : bad) {
    std::istringstream in(
        std::string(R"({"timestamp": 0, "input_length": 4, "output_length": 1})") + "\n" + line +
        "\n");
    try {
      import_workload(in, "w.jsonl", {});
      ADD_FAILURE() << "accepted: " << line;
    } catch (const model::InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
    }
  }
  std::istringstream empty("\n\n");
  EXPECT_THROW(import_workload(empty, "w.jsonl", {}), model::InputError);
}

// A file that is not text (all NUL bytes, as /dev/zero) or one endless line is refused at once
// by the bounded line reader, not read whole.
TEST(WorkloadImport, NotTextOrEndlessLineRefusedPromptly) {
  std::istringstream zeros(std::string(std::size_t{1} << 20, '\0'));
  try {
    import_workload(zeros, "zero", {});
    ADD_FAILURE() << "accepted NUL bytes";
  } catch (const model::InputError& e) {
    EXPECT_STREQ(e.what(), "zero:1: line: a NUL byte at column 1 (not a text file)");
  }
  std::istringstream endless(std::string(kWorkloadLineBytesMax + 10, '7'));
  try {
    import_workload(endless, "long", {});
    ADD_FAILURE() << "accepted a line past the limit";
  } catch (const model::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("long:1: line: longer than {} bytes", kWorkloadLineBytesMax));
  }
}

} // namespace
} // namespace mc::scenarios
