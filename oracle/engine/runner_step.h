// Internal to the oracle runner: what one execute() carries between its phases.
#pragma once

#include "oracle/engine/runner.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::oracle::engine {

// Where a batch row's pre-step source column came from. Kept as numbers and rendered only
// when a finding needs the sentence (most steps find nothing).
struct SeedNote {
  enum class Origin : std::uint8_t {
    derived,         // V1: (num_computed - 1) // divisor, no entry survived
    kept,            // V1: the request's entry of its last step
    seeded,          // V2: seeded this step as (num_computed - 1) // divisor = state_idx
    kept_slot,       // V2: the slot's state_idx of its last step
  };
  Origin origin = Origin::kept;
  std::int32_t num_computed = 0;
  std::int32_t divisor = 0;
  std::int32_t state_idx = 0;
};

std::string describe(const SeedNote& note);

struct OracleRunner::StepCtx {
  const model::Step& step;
  const Ledger& ledger;
  StepRecord& rec;
  std::vector<std::int32_t> num_computed; // per batch row, before the step
  std::vector<RequestState*> state;       // per batch row: the runner's record of its request
  std::vector<const RequestTruth*> truth; // per batch row: its ground truth
  std::vector<SeedNote> seed_note;        // per batch row: where its source column came from
  // What launch_case_'s block tables hold now: nothing of this step yet, or one of the
  // gathers of OracleRunner::Tables (they do not change within a step).
  std::optional<OracleRunner::Tables> tables;
};

} // namespace mc::oracle::engine
