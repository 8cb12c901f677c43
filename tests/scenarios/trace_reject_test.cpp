// A catalogue of bad traces, one per rule of FORMAT.md: each is refused with the file, the
// line and the field of the fault, in the form "FILE:LINE: field: reason".
#include "model/errors.h"
#include "scenarios/trace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

namespace mc::scenarios {
namespace {

// tiny-mamba2: one group, 32 blocks; B = 4, two spec tokens.
const std::string kConfig = R"("config":{"mamba_block_size":4,"attn_block_size":2,)"
                            R"("num_spec_tokens":2,"num_spec_blocks":2,"mode":"align",)"
                            R"("conv_layout":"SD","runner":"v1","tp_size":1})";
const std::string kHeader = R"({"format":"mambacheck-trace","version":1,)" + kConfig +
                            R"(,"layout":{"preset":"tiny-mamba2"}})";

std::string step(int index, const std::string& body) {
  return fmt::format(R"({{"index":{}{}{}}})", index, body.empty() ? "" : ",", body);
}
// "a" arrives with a 5-token prompt and is prefilled whole.
const std::string kArriveA = step(
    0, R"("new_requests":[{"req_id":"a","prompt_token_ids":[1,2,3,4,5],"block_ids":[[1,2,3]]}],)"
       R"("scheduled":[{"req_id":"a","num_scheduled_tokens":5,"token_ids":[1,2,3,4,5]}])");
// Step 1 decodes "a" with the scheduled entry `row`.
std::string decode_a(const std::string& row) {
  return step(1, R"("cached_requests":[{"req_id":"a","num_computed_tokens":5}],"scheduled":[)" +
                     row + "]");
}

// The same geometry in all mode (a table of cdiv(tokens, 4) + 2 columns).
std::string all_mode_header() {
  std::string h = kHeader;
  const std::string align = R"("mode":"align")";
  h.replace(h.find(align), align.size(), R"("mode":"all")");
  return h;
}

struct BadTrace {
  std::string name;
  std::string text; // the whole file
  int line;
  std::string field;
  std::string reason_part;
};

std::string lines(std::initializer_list<std::string> items) {
  std::string out;
  for (const std::string& s : items)
    out += s + "\n";
  return out;
}

// The same geometry as an async trace (version 3), "a" arrived and decoded once with two drafts
// of which one was accepted, and step 2 planned during step 1 with the cached entry `entry`.
std::string async_header() {
  std::string h = kHeader;
  const std::string v1 = R"("version":1,)";
  h.replace(h.find(v1), v1.size(), R"("version":3,"async_scheduling":true,)");
  return h;
}
std::string async_trace(const std::string& step2_fields, const std::string& entry) {
  return lines({async_header(), kArriveA,
                step(1, R"("planned_during":0,"cached_requests":[{"req_id":"a",)"
                        R"("num_computed_tokens":5}],"scheduled":[{"req_id":"a",)"
                        R"("num_scheduled_tokens":3,"num_draft_tokens":2,)"
                        R"("token_ids":[6,7,9],"num_accepted_tokens":2}])"),
                step(2, step2_fields + R"("cached_requests":[)" + entry +
                            R"(],"scheduled":[{"req_id":"a","num_scheduled_tokens":1,)"
                            R"("token_ids":[8]}])")});
}

std::vector<BadTrace> header_catalogue() {
  const auto with = [](const std::string& replace, const std::string& by) {
    std::string h = kHeader;
    h.replace(h.find(replace), replace.size(), by);
    return h + "\n";
  };
  return {
      {"empty file", "", 1, "header", "empty"},
      {"malformed header",
       R"({"format":"mambacheck-trace",)"
       "\n",
       1, "json", "the JSON value is cut short: the line ends at column 29"},
      {"version from the future", with(R"("version":1)", R"("version":6)"), 1, "version",
       "format version 6; this mambacheck reads version 5"},
      {"version zero", with(R"("version":1)", R"("version":0)"), 1, "version", "start at 1"},
      {"async flag before version 3",
       with(R"("version":1,)", R"("version":2,"async_scheduling":true,)"), 1, "async_scheduling",
       "unknown field"},
      {"scheduler before version 4",
       with(R"("version":1,)", R"("version":3,"scheduler":{"eagle":true},)"), 1, "scheduler",
       "unknown field"},
      {"unknown cache registration",
       with(R"("version":1,)", R"("version":4,"scheduler":{"cache_registration":"later"},)"), 1,
       "scheduler.cache_registration", "expected after_commit or at_schedule, got 'later'"},
      {"unknown scheduler field",
       with(R"("version":1,)", R"("version":4,"scheduler":{"eagle_drops":true},)"), 1,
       "scheduler.eagle_drops", "unknown field"},
      {"other format", with("mambacheck-trace", "mambacheck-case"), 1, "format", "expected"},
      {"missing config",
       R"({"format":"mambacheck-trace","version":1,"layout":{"preset":"tiny-mamba2"}})"
       "\n",
       1, "config", "missing"},
      {"config field of the wrong type",
       with(R"("mamba_block_size":4)", R"("mamba_block_size":"4")"), 1, "config.mamba_block_size",
       "expected an integer"},
      {"negative block size", with(R"("mamba_block_size":4)", R"("mamba_block_size":-4)"), 1,
       "config.mamba_block_size", "out of range"},
      {"impossible config", with(R"("num_spec_blocks":2)", R"("num_spec_blocks":1)"), 1, "config",
       "num_spec_blocks == num_spec_tokens"},
      {"unknown mode", with(R"("mode":"align")", R"("mode":"aligned")"), 1, "config.mode",
       "expected none, align or all"},
      {"unknown header field", with(R"("version":1,)", R"("version":1,"colour":"red",)"), 1,
       "colour", "unknown field"},
      {"unknown preset", with("tiny-mamba2", "tiny-mamba9"), 1, "layout.preset", "unknown preset"},
      {"pool list of the wrong length",
       with(R"("preset":"tiny-mamba2"})", R"("preset":"tiny-mamba2"},"block_pool_sizes":[8,8])"), 1,
       "block_pool_sizes", "the layout has 1 groups"},
      {"pool larger than the arena",
       with(R"("preset":"tiny-mamba2"})", R"("preset":"tiny-mamba2"},"block_pool_sizes":[33])"), 1,
       "block_pool_sizes[0]", "out of range 2..32"},
      {"source not an object", with(R"("version":1,)", R"("version":1,"source":"me",)"), 1,
       "source", "expected an object"},
  };
}

std::vector<BadTrace> step_catalogue() {
  const std::string h = kHeader;
  const std::string running = R"({"req_id":"a","num_computed_tokens":7)";
  return {
      {"planned_during in a trace that is not async",
       lines({h, kArriveA,
              step(1, R"("planned_during":0,"cached_requests":[{"req_id":"a",)"
                      R"("num_computed_tokens":5}],"scheduled":[{"req_id":"a",)"
                      R"("num_scheduled_tokens":1,"token_ids":[6]}])")}),
       3, "planned_during", "unknown field"},
      {"planned during a step that is not the one before",
       async_trace(R"("planned_during":0,)", running + R"(,"num_computed_tokens_optimistic":8})"),
       4, "planned_during",
       "0: one step is in flight while the next is planned, the step "
       "before it (1)"},
      {"an optimistic count with nothing in flight",
       async_trace("", running + R"(,"num_computed_tokens_optimistic":8})"), 4,
       "cached_requests[0].num_computed_tokens_optimistic", "needs planned_during"},
      {"an optimistic count equal to the true one",
       async_trace(R"("planned_during":1,)", running + R"(,"num_computed_tokens_optimistic":7})"),
       4, "cached_requests[0].num_computed_tokens_optimistic",
       "7 is not num_computed_tokens 7 plus 1..num_spec_tokens 2 rejected drafts"},
      {"an optimistic count past the drafts of one row",
       async_trace(R"("planned_during":1,)", running + R"(,"num_computed_tokens_optimistic":10})"),
       4, "cached_requests[0].num_computed_tokens_optimistic", "10 is not"},
      {"malformed step", lines({h, R"({"index":0,"scheduled":[)"}), 2, "scheduled[0]",
       "the JSON value is cut short: the line ends at column 24"},
      {"empty line", lines({h, kArriveA, ""}) + kArriveA, 3, "line", "empty line"},
      {"nested too deep",
       lines({h, R"({"index":0,"x_deep":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]})"}), 2, "json",
       "nested deeper"},
      {"step not an object", lines({h, "[1,2]"}), 2, "line", "expected an object"},
      {"index of the wrong type", lines({h, R"({"index":"0"})"}), 2, "index",
       "expected an integer"},
      {"missing index", lines({h, R"({"scheduled":[]})"}), 2, "index", "missing"},
      {"negative index", lines({h, R"({"index":-1})"}), 2, "index", "out of range"},
      {"index not increasing", lines({h, kArriveA, step(0, "")}), 3, "index", "must increase"},
      {"unknown step field", lines({h, R"({"index":0,"reset_prefix_cache":false,"rest":1})"}), 2,
       "rest", "unknown field"},
      {"misspelt scheduled field",
       lines(
           {h, kArriveA,
            decode_a(
                R"({"req_id":"a","num_scheduled_tokens":2,"num_draft_token":1,"token_ids":[6,7]})")}),
       3, "scheduled[0].num_draft_token", "unknown field"},
      {"missing token ids",
       lines({h, kArriveA, decode_a(R"({"req_id":"a","num_scheduled_tokens":1})")}), 3,
       "scheduled[0].token_ids", "missing"},
      {"token ids of the wrong type",
       lines(
           {h, kArriveA, decode_a(R"({"req_id":"a","num_scheduled_tokens":1,"token_ids":[6.5]})")}),
       3, "scheduled[0].token_ids[0]", "expected an integer"},
      {"negative token id",
       lines(
           {h, kArriveA, decode_a(R"({"req_id":"a","num_scheduled_tokens":1,"token_ids":[-6]})")}),
       3, "scheduled[0].token_ids[0]", "out of range"},
      {"negative scheduled count",
       lines({h, kArriveA, decode_a(R"({"req_id":"a","num_scheduled_tokens":-1,"token_ids":[]})")}),
       3, "scheduled[0].num_scheduled_tokens", "outside 1.."},
      {"negative draft count",
       lines(
           {h, kArriveA,
            decode_a(
                R"({"req_id":"a","num_scheduled_tokens":1,"num_draft_tokens":-1,"token_ids":[6]})")}),
       3, "scheduled[0].num_draft_tokens", "negative"},
      {"negative computed count",
       lines({h, kArriveA,
              step(1, R"("cached_requests":[{"req_id":"a","num_computed_tokens":-5}],)"
                      R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[6]}])")}),
       3, "cached_requests[0].num_computed_tokens", "negative"},
      {"token count differs from scheduled",
       lines({h, kArriveA, decode_a(R"({"req_id":"a","num_scheduled_tokens":2,"token_ids":[6]})")}),
       3, "scheduled[0].token_ids", "1 token ids for 2 scheduled tokens"},
      {"drafts not fewer than scheduled",
       lines(
           {h, kArriveA,
            decode_a(
                R"({"req_id":"a","num_scheduled_tokens":2,"num_draft_tokens":2,"token_ids":[6,7]})")}),
       3, "scheduled[0].num_draft_tokens", "never a draft"},
      {"drafts beyond num_spec_tokens",
       lines({h, kArriveA,
              decode_a(R"({"req_id":"a","num_scheduled_tokens":4,"num_draft_tokens":3,)"
                       R"("token_ids":[6,7,8,9],"num_accepted_tokens":1})")}),
       3, "scheduled[0].num_draft_tokens", "more than num_spec_tokens 2"},
      {"accepted zero",
       lines({h, kArriveA,
              decode_a(R"({"req_id":"a","num_scheduled_tokens":3,"num_draft_tokens":2,)"
                       R"("token_ids":[6,7,8],"num_accepted_tokens":0})")}),
       3, "scheduled[0].num_accepted_tokens", "outside 1..3"},
      {"accepted beyond 1 + drafts",
       lines({h, kArriveA,
              decode_a(R"({"req_id":"a","num_scheduled_tokens":3,"num_draft_tokens":2,)"
                       R"("token_ids":[6,7,8],"num_accepted_tokens":4})")}),
       3, "scheduled[0].num_accepted_tokens", "outside 1..3"},
      {"accepted on a prefill row",
       lines({h,
              step(0, R"("new_requests":[{"req_id":"a","prompt_token_ids":[1],"block_ids":[[1]]}],)"
                      R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1],)"
                      R"("num_accepted_tokens":2}])")}),
       2, "scheduled[0].num_accepted_tokens", "outside 1..1"},
      {"block id past the pool",
       lines({h,
              step(0,
                   R"("new_requests":[{"req_id":"a","prompt_token_ids":[1],"block_ids":[[1,32]]}],)"
                   R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "new_requests[0].block_ids[0][1]", "outside group 0's pool 0..31"},
      {"pad in a trace",
       lines(
           {h, kArriveA,
            step(
                1,
                R"("cached_requests":[{"req_id":"a","new_block_ids":[[-1]],"num_computed_tokens":5}],)"
                R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[6]}])")}),
       3, "cached_requests[0].new_block_ids[0][0]", "-1 pads belong to the runner"},
      {"block rows for another layout",
       lines(
           {h,
            step(0,
                 R"("new_requests":[{"req_id":"a","prompt_token_ids":[1],"block_ids":[[1],[2]]}],)"
                 R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "new_requests[0].block_ids", "the layout has 1"},
      {"prefix hit not on a boundary",
       lines(
           {h,
            step(0,
                 R"("new_requests":[{"req_id":"a","prompt_token_ids":[1,2,3,4,5,6],)"
                 R"("num_computed_tokens":3,"block_ids":[[1]]}],)"
                 R"("scheduled":[{"req_id":"a","num_scheduled_tokens":3,"token_ids":[4,5,6]}])")}),
       2, "new_requests[0].num_computed_tokens", "not a multiple of mamba_block_size 4"},
      {"scheduled before it arrived",
       lines({h,
              step(0, R"("scheduled":[{"req_id":"z","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "scheduled[0].req_id", "scheduled before it arrived"},
      {"live but not listed as cached",
       lines({h, kArriveA,
              step(1, R"("scheduled":[{"req_id":"a",)"
                      R"("num_scheduled_tokens":1,"token_ids":[6]}])")}),
       3, "scheduled[0].req_id", "not among this step's cached_requests"},
      {"new request not scheduled",
       lines({h,
              step(0,
                   R"("new_requests":[{"req_id":"a","prompt_token_ids":[1],"block_ids":[[1]]}])")}),
       2, "new_requests[0].req_id", "not scheduled"},
      {"new id that already exists",
       lines({h, kArriveA,
              [] {
                std::string s = kArriveA;
                s.replace(s.find(R"("index":0)"), 9, R"("index":1)");
                return s;
              }()}),
       3, "new_requests[0].req_id", "already exists (arrived at step 0)"},
      {"cached request not known",
       lines({h,
              step(0, R"("cached_requests":[{"req_id":"q","num_computed_tokens":0}],)"
                      R"("scheduled":[{"req_id":"q","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "cached_requests[0].req_id", "not known"},
      {"preempted request not known", lines({h, kArriveA, step(1, R"("preempted_req_ids":["b"])")}),
       3, "preempted_req_ids[0]", "not known"},
      {"finished request not known", lines({h, step(0, R"("finished_req_ids":["a"])")}), 2,
       "finished_req_ids[0]", "not known"},
      {"finished twice",
       lines({h, kArriveA, step(1, R"("finished_req_ids":["a"])"),
              step(2, R"("finished_req_ids":["a"])")}),
       4, "finished_req_ids[0]", "not known"},
      {"preempted, back without resume",
       lines({h, kArriveA, step(1, R"("preempted_req_ids":["a"])"),
              step(2, R"("cached_requests":[{"req_id":"a","num_computed_tokens":0}],)"
                      R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       4, "cached_requests[0].resumed", "must come back resumed"},
      {"preempted and scheduled in one step without resume",
       lines({h, kArriveA,
              decode_a(R"({"req_id":"a","num_scheduled_tokens":1,"token_ids":[6]})")
                  .replace(0, 1, R"({"preempted_req_ids":["a"],)")}),
       3, "cached_requests[0].resumed", "must come back resumed"},
      {"resumed without its table",
       lines(
           {h, kArriveA, step(1, R"("preempted_req_ids":["a"])"),
            step(2, R"("cached_requests":[{"req_id":"a","resumed":true,"num_computed_tokens":0}],)"
                    R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       4, "cached_requests[0].new_block_ids", "required for a resumed request"},
      {"reset without resume",
       lines({h, kArriveA,
              decode_a(R"({"req_id":"a","num_scheduled_tokens":1,"token_ids":[6]})")
                  .replace(0, 1, R"({"reset_prefix_cache":true,)")}),
       3, "cached_requests[0].resumed", "reset_prefix_cache"},
      {"both prompt forms",
       lines({h,
              step(0, R"("new_requests":[{"req_id":"a","prompt_token_ids":[1],"prompt_len":1,)"
                      R"("prefix_id":0,"block_ids":[[1]]}],)"
                      R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "new_requests[0].prompt_len", "not both"},
      {"derived prompt without its suffix",
       lines({h,
              step(0, R"("new_requests":[{"req_id":"a","prompt_len":4,"prefix_id":0,)"
                      R"("prefix_len":2,"block_ids":[[1]]}],)"
                      R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "new_requests[0].suffix_id", "missing"},
      {"control character in an id",
       lines({h,
              step(0,
                   R"("new_requests":[{"req_id":"a\nb","prompt_token_ids":[1],"block_ids":[[1]]}],)"
                   R"("scheduled":[{"req_id":"a\nb","num_scheduled_tokens":1,"token_ids":[1]}])")}),
       2, "new_requests[0].req_id", "control character"},
  };
}

void expect_refused(const BadTrace& bad, TraceReaderOptions options = {}) {
  SCOPED_TRACE(bad.name);
  std::istringstream in(bad.text);
  try {
    TraceReader reader(in, "bad.jsonl", options);
    while (reader.next()) {
    }
    ADD_FAILURE() << "accepted: " << bad.text;
  } catch (const model::InputError& e) {
    const std::string what = e.what();
    const std::string prefix = fmt::format("bad.jsonl:{}: {}: ", bad.line, bad.field);
    EXPECT_EQ(what.rfind(prefix, 0), 0u) << what << "\n  expected to start with: " << prefix;
    EXPECT_NE(what.find(bad.reason_part), std::string::npos)
        << what << "\n  expected to contain: " << bad.reason_part;
  }
}

TEST(TraceReject, BadHeaders) {
  for (const BadTrace& bad : header_catalogue())
    expect_refused(bad);
}

TEST(TraceReject, BadSteps) {
  for (const BadTrace& bad : step_catalogue())
    expect_refused(bad);
}

// Text the JSON parser refuses or would misread, said in the reader's words with the column
// within the line (or the field being read), never the parser's own message.
TEST(TraceReject, JsonTextNamedByColumnOrField) {
  const std::string h = kHeader;
  const std::string nul(1, '\0');
  const std::vector<BadTrace> bad = {
      {"a number past a double",
       lines({h, R"({"index":0,"scheduled":[{"req_id":"a","num_scheduled_tokens":1e400}]})"}), 2,
       "scheduled[0].num_scheduled_tokens", "the number 1e400 is too large"},
      {"a literal that is not JSON", lines({h, R"({"index":0,"scheduled":[x]})"}), 2,
       "scheduled[0]", "not valid JSON at column 25: invalid literal"},
      {"text after the value", lines({h, kArriveA + " x"}), 2, "json",
       fmt::format("text after the end of the JSON value, at column {}", kArriveA.size() + 2)},
      {"a second value on the line", lines({h, kArriveA + kArriveA}), 2, "json",
       fmt::format("text after the end of the JSON value, at column {}", kArriveA.size() + 1)},
      // The parser would stop at the NUL and take the step before it.
      {"a NUL byte after the value", lines({h, kArriveA + nul + "garbage"}), 2, "line",
       fmt::format("a NUL byte at column {} (not a text file)", kArriveA.size() + 1)},
      {"a NUL byte in the header", lines({h.substr(0, 10) + nul + h.substr(10)}), 1, "line",
       "a NUL byte at column 11"},
  };
  for (const BadTrace& b : bad) {
    expect_refused(b);
    std::istringstream in(b.text);
    try {
      TraceReader reader(in, "bad.jsonl");
      while (reader.next()) {
      }
    } catch (const model::InputError& e) {
      EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
    }
  }
}

TEST(TraceReject, LineOverTheLimit) {
  const std::string long_line = R"({"index":0,"x_pad":")" + std::string(5000, 'x') + "\"}";
  expect_refused({"long line", kHeader + "\n" + long_line + "\n", 2, "line", "longer than 4096"},
                 TraceReaderOptions{.line_bytes_max = 4096});
}

TEST(TraceReject, MissingFile) {
  EXPECT_THROW(TraceReader("/nonexistent/mc/trace.jsonl"), model::InputError);
}

TEST(TraceReject, TheAsyncTraceReadsWithoutItsFault) {
  std::istringstream in(async_trace(R"("planned_during":1,)",
                                    R"({"req_id":"a","num_computed_tokens":7,)"
                                    R"("num_computed_tokens_optimistic":8})"));
  TraceReader reader(in, "async.jsonl");
  EXPECT_TRUE(reader.header().async_scheduling);
  std::vector<model::Step> steps;
  while (std::optional<model::Step> s = reader.next())
    steps.push_back(std::move(*s));
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[2].planned_during, 1);
  EXPECT_EQ(steps[2].cached_requests[0].num_computed_tokens_optimistic, 8);
  EXPECT_EQ(steps[2].cached_requests[0].num_computed_planned(), 8);
}

TEST(TraceReject, EveryCatalogueTraceIsValidWithoutItsFault) {
  // The building blocks themselves read cleanly, so each refusal is due to its one fault.
  std::istringstream in(kHeader + "\n" + kArriveA + "\n" +
                        decode_a(R"({"req_id":"a","num_scheduled_tokens":3,"num_draft_tokens":2,)"
                                 R"("token_ids":[6,7,8],"num_accepted_tokens":3})") +
                        "\n");
  TraceReader reader(in, "good.jsonl");
  int steps = 0;
  while (reader.next())
    ++steps;
  EXPECT_EQ(steps, 2);
  // In all mode a decode with all its drafts, with some (vLLM's scheduler trims them to the
  // token budget) or with none reads as well.
  std::istringstream all(all_mode_header() + "\n" + kArriveA + "\n" +
                         decode_a(R"({"req_id":"a","num_scheduled_tokens":3,"num_draft_tokens":2,)"
                                  R"("token_ids":[6,7,8],"num_accepted_tokens":2})") +
                         "\n" +
                         step(2, R"("cached_requests":[{"req_id":"a","num_computed_tokens":7}],)"
                                 R"("scheduled":[{"req_id":"a","num_scheduled_tokens":2,)"
                                 R"("num_draft_tokens":1,"token_ids":[8,9],)"
                                 R"("num_accepted_tokens":1}])") +
                         "\n" +
                         step(3, R"("cached_requests":[{"req_id":"a","num_computed_tokens":8}],)"
                                 R"("scheduled":[{"req_id":"a","num_scheduled_tokens":1,)"
                                 R"("token_ids":[9]}])") +
                         "\n");
  TraceReader all_reader(all, "all.jsonl");
  steps = 0;
  while (all_reader.next())
    ++steps;
  EXPECT_EQ(steps, 4);
}

// Partial-hash hits (version 5): the scheduler's hash_block_size and a step's block_copies.
std::string partial_header(const std::string& scheduler) {
  std::string h = kHeader;
  h.replace(h.find(R"("version":1)"), 11, R"("version":5)");
  h.insert(h.size() - 1, R"(,"scheduler":)" + scheduler);
  return h;
}
const std::string kUnit2 = R"({"cache_registration":"after_commit","hash_block_size":2})";
// "b" arrives with a 5-token prompt and a hit of `computed` tokens (2: a hash unit, half a
// block) whose private copy is block 5, at its hit column 0.
std::string partial_hit(const std::string& copies, int computed = 2) {
  std::string tokens;
  for (int t = computed + 1; t <= 5; ++t)
    tokens += fmt::format("{}{}", tokens.empty() ? "" : ",", t);
  return step(1, fmt::format(R"("new_requests":[{{"req_id":"b","prompt_token_ids":[1,2,3,4,5],)"
                             R"("num_computed_tokens":{},"block_ids":[[5,6,7]]}}],)"
                             R"("scheduled":[{{"req_id":"b","num_scheduled_tokens":{},)"
                             R"("token_ids":[{}]}}]{})",
                             computed, 5 - computed, tokens, copies));
}

TEST(TraceReject, PartialHashHits) {
  const std::string h = partial_header(kUnit2);
  {
    std::istringstream in(lines({h, kArriveA, partial_hit(R"(,"block_copies":[[0,2,5]])")}));
    TraceReader reader(in, "partial.jsonl");
    EXPECT_EQ(reader.header().contract.hash_block_size, 2);
    ASSERT_TRUE(reader.next());
    const std::optional<model::Step> s = reader.next();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->block_copies, (std::vector<model::BlockCopy>{{.group = 0, .src = 2, .dst = 5}}));
    EXPECT_EQ(s->new_requests[0].num_computed_tokens, 2);
  }
  const std::vector<BadTrace> bad = {
      {"a hash unit that does not divide the block size",
       lines({partial_header(R"({"cache_registration":"after_commit","hash_block_size":3})")}), 1,
       "scheduler.hash_block_size", "must divide mamba_block_size 4"},
      {"a hit off the hash unit", lines({h, kArriveA, partial_hit("", 3)}), 3,
       "new_requests[0].num_computed_tokens", "not a multiple of hash_block_size 2"},
      {"copies without partial hits",
       lines({partial_header(R"({"cache_registration":"at_schedule"})"), kArriveA,
              partial_hit(R"(,"block_copies":[[0,2,5]])", 0)}),
       3, "block_copies", "only with partial-hash hits"},
      {"a copy outside the pool",
       lines({h, kArriveA, partial_hit(R"(,"block_copies":[[0,2,32]])")}), 3, "block_copies[0]",
       "not a block of group 0's pool"},
      {"a copy of the null block",
       lines({h, kArriveA, partial_hit(R"(,"block_copies":[[0,0,5]])")}), 3, "block_copies[0]",
       "not a block of group 0's pool"},
      {"a chain of copies",
       lines({h, kArriveA, partial_hit(R"(,"block_copies":[[0,2,5],[0,5,9]])")}), 3,
       "block_copies[0]", "both a destination and a source"},
      {"a copy of no group", lines({h, kArriveA, partial_hit(R"(,"block_copies":[[1,2,5]])")}), 3,
       "block_copies[0]", "the layout has 1 groups"},
      {"a copy that is not [group, source, destination]",
       lines({h, kArriveA, partial_hit(R"(,"block_copies":[[0,2]])")}), 3, "block_copies[0]",
       "expected [group, source block, destination block]"},
  };
  for (const BadTrace& b : bad)
    expect_refused(b);
  // Before version 5 a step has no block copies.
  std::string v4 = h;
  v4.replace(v4.find(R"("version":5)"), 11, R"("version":4)");
  v4.replace(v4.find(R"(,"hash_block_size":2)"), 20, "");
  expect_refused({"block copies in a version 4 trace",
                  lines({v4, kArriveA, partial_hit(R"(,"block_copies":[[0,2,5]])", 0)}), 3,
                  "block_copies", "unknown"});
}

} // namespace
} // namespace mc::scenarios
