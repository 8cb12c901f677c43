// Internal to the oracle runner: what one execute() carries between its phases.
#pragma once

#include "oracle/engine/runner.h"

#include <string>
#include <vector>

namespace mc::oracle::engine {

struct OracleRunner::StepCtx {
  const model::Step& step;
  const Ledger& ledger;
  StepRecord& rec;
  std::vector<std::int32_t> num_computed; // per batch row, before the step
  std::vector<std::string> seed_note;     // per batch row: where its source column came from
  bool tables_filled = false;             // launch_case_'s block tables hold this step's batch
};

} // namespace mc::oracle::engine
