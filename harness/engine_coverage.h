// Engine-level coverage (model/coverage.h), counted from the steps the lockstep loop ran: the
// scheduler's step as the oracle consumed it and the oracle's record of it (its launches, their
// decisions and arrays). Nothing is taken from the generator or the scheduler's intentions, so
// a recorded trace counts the same on replay as the run that recorded it did, except aborts,
// which a step lists among the finished requests: a run knows them from its scheduler, a
// replay only where the aborted request was waiting (preempted, not yet resumed) and no row of
// it was in flight when it was preempted (async: that row may have finished it).
#pragma once

#include "model/coverage.h"
#include "model/input_batch.h"
#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/runner.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mc::harness {

class EngineCoverageCounter {
public:
  // `lookahead`: the tokens a drafter adds to each row's allocation (OracleSide::lookahead).
  explicit EngineCoverageCounter(const model::Layout& layout, std::int32_t lookahead = 0);

  // One step that ran on both sides. `aborts`: the requests the scheduler aborted in this
  // step, when the steps come from a scheduler; nullopt for a trace.
  void count(const model::Step& step, const oracle::engine::StepRecord& record,
             std::optional<std::int64_t> aborts);

  const model::Coverage& coverage() const { return coverage_; }

private:
  struct Request {
    std::int32_t prompt_len = 0;
    std::int32_t last_accepted = 1; // of its last decode with drafts; 1 otherwise
    bool waiting = false;           // preempted (or force-preempted) and not resumed yet
    bool forced = false;            // force-preempted by reset_prefix_cache
    std::int64_t last_step = -1;    // the last step with a row of it
    // Async: preempted while its row was in flight; that row may finish it while it waits.
    bool preempted_in_flight = false;
  };
  void count_requests(const model::Step& step, std::optional<std::int64_t> aborts);
  void count_row(const model::ScheduledRequest& s, std::int32_t computed_before, const Request& r);
  void count_slots(const model::Step& step, const model::LaunchRecord& launch);
  void count_async(const model::Step& step, const oracle::engine::StepRecord& record);
  void count_condensed(const model::Step& step);
  void count_forward(const model::Step& step, const oracle::engine::StepRecord& record,
                     const std::unordered_map<std::string_view, std::int32_t>& computed);
  bool hit_past_prompts(const std::vector<std::int32_t>& prompt, std::int32_t hit);
  bool hit_a_b_a(const std::vector<std::int32_t>& prompt, std::int32_t hit);

  const model::Layout& layout_;
  std::int32_t lookahead_ = 0;
  model::Coverage coverage_ = model::Coverage::empty(model::CoverageLevel::engine);
  std::unordered_map<std::string, Request> requests_;
  std::unordered_set<std::string> running_; // scheduled and neither finished nor preempted
  std::vector<std::string> slot_owner_;     // V2: the request each slot served last
  model::InputBatchRows input_batch_;       // V1 align: the runner's persistent rows
  // A hash of every block-aligned prefix of every prompt seen: a word per block of prompt, not
  // per token, so a long recording's replay does not keep its prompts.
  std::unordered_set<std::uint64_t> prompt_prefixes_;
  // For prefix-hit-a-b-a, a few words per new request: each whole prompt's hash with the order
  // the request came in and the first turn of its chat, and per first block, the requests that
  // took a hit of it, in order.
  struct Admitted {
    std::int64_t order = 0;
    std::int64_t chat = 0; // the order of the chat's first turn
  };
  std::unordered_map<std::uint64_t, Admitted> prompts_;
  std::unordered_map<std::uint64_t, std::vector<Admitted>> hits_by_first_block_;
  std::int64_t admitted_ = 0;
};

} // namespace mc::harness
