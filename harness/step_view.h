// What the oracle believes happened at each engine step, row by row, for a person or a tool to
// read (`replay --steps-out`, `replay --explain STEP`, `run --steps-out`, engine counterexample
// directories): for each batch row the tokens computed before it, scheduled, drafts and
// accepted; the running state column and num_accepted before and after; the pre-step copy and
// the post-step copy as (source column, token bias, destination column); the request's block
// table per group; whether it came with a prefix hit. For the step as a whole, the blocks the
// block manager freed and the blocks it registered in the prefix cache.
//
// A StepViewer is fed by the lockstep hooks: before() ahead of each oracle step, after() with
// the step as the oracle ran it. It reads the oracle's runner and block manager and decides
// nothing; the view is derived, never compared.
#pragma once

#include "model/forward_metadata.h"

#include "harness/lockstep.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::harness {

struct CopyView {
  std::int32_t src_col = 0;
  std::int32_t token_bias = 0;
  std::int32_t dst_col = 0;
  std::int32_t states = 0; // (request, state) copies of this row in the launch
};

struct RowView {
  std::int32_t batch_row = 0;
  std::string req_id;
  bool is_new = false;
  bool resumed = false;
  std::int32_t computed_before = 0;
  // Async: the count the scheduler planned from, where the step in flight's rejected drafts
  // made it larger than computed_before.
  std::optional<std::int32_t> computed_optimistic;
  std::int32_t scheduled = 0;
  std::int32_t drafts = 0;
  std::int32_t accepted = 1;
  std::optional<std::int32_t> prefix_hit_tokens; // new or resumed rows: tokens from the cache
  std::optional<std::int32_t> state_col_before;  // where the previous step left it
  std::optional<std::int32_t> state_col_after;   // where the next step reads
  std::optional<std::int32_t> num_accepted_before;
  std::optional<std::int32_t> num_accepted_after;
  std::optional<CopyView> pre_copy;  // precopy or batch_copy
  std::optional<CopyView> post_copy; // postprocess or postprocess_align
  model::GroupBlockIds table;        // after the step; 0 is the null block
};

struct StepView {
  std::int64_t step = 0;
  std::optional<std::int64_t> planned_during; // async: the step in flight while it was planned
  std::int64_t frees_held_back = 0;           // async: frees held back for that step
  std::vector<RowView> rows;
  std::vector<std::string> preempted;
  std::vector<std::string> finished;
  bool reset_prefix_cache = false;
  std::vector<std::vector<std::int32_t>> freed;  // per group: blocks whose last reference went
  std::vector<std::vector<std::int32_t>> cached; // per group: registered in the prefix cache
  std::vector<std::string> launches;             // kinds, in order
  model::ForwardMetadata metadata; // what the forward's kernels were handed (oracle's derivation)
  std::optional<std::string> finding;            // the oracle's, when the step broke one
};

class StepViewer {
public:
  void before(const OracleSide& oracle);
  StepView after(OracleSide& oracle, const OracleStep& step);

private:
  struct Read {
    std::int32_t state_col = 0;
    std::int32_t num_accepted = 1;
  };
  std::unordered_map<std::string, Read> last_read_;
  std::vector<std::vector<std::int32_t>> held_before_; // per group, blocks with references
  std::vector<std::uint64_t> registrations_before_;    // per group
};

// One JSON object per step (the lines of --steps-out); null marks the null block in tables.
nlohmann::ordered_json to_json(const StepView& view);

// The same as a table a person reads (`replay --explain STEP`).
std::string explain(const StepView& view);

// The trace's expectations of this step (model::RowExpectation) against what the oracle did:
// every one that does not hold, in the order the trace states them, as a Difference of kind
// "expectation" naming the step, the request, the field and both values. Adds the fields
// checked to `checked`.
std::vector<Difference> check_expectations(OracleSide& oracle, const OracleStep& step,
                                           std::int64_t& checked);

} // namespace mc::harness
