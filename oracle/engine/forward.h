// The synthetic forward of one step on the oracle side (model/FORWARD.md, REFERENCE.md 4).
//
// For every scheduled request and every state tensor: find the blocks the kernels would
// touch (align: the window row[state_idx .. state_idx + nsb]; all: the column the runner
// reads, the block of the last scheduled token, the boundaries crossed and a decode's
// speculative columns after that block), VERIFY the initial state it
// reads against the ground truth after num_computed tokens, then write the stamps of the
// tokens it processes, drafts included (so rejected drafts leave wrong-token stamps behind).
// Every write is logged. The first wrong read or bad index stops the step with a finding.
#pragma once

#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/ledger.h"
#include "oracle/engine/state_store.h"
#include "oracle/engine/writes.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace mc::oracle::engine {

struct ForwardRow {
  const model::ScheduledRequest* scheduled = nullptr;
  std::int32_t num_computed = 0;
  std::int32_t num_accepted = 1;       // a as the step starts (after the pre-step reset)
  std::int32_t state_idx = 0;          // align: window start; all: the column read
  std::int32_t anchor = -1;            // all mode with spec decode: the metadata's prev-step anchor
  std::int32_t last_scheduled_col = 0; // all mode
  std::int32_t first_scheduled_col = 0;      // all mode
  const model::GroupBlockIds* row = nullptr; // the runner's block-table row per group
  const RequestTruth* truth = nullptr;       // the request's ground truth (the ledger's)
};

struct ForwardContext {
  const model::Layout* layout = nullptr;
  StateStore* states = nullptr;
  std::int64_t step = 0;
  AccessLog* log = nullptr;
  std::int64_t* bytes_checked = nullptr;
  std::span<const std::int64_t> conv_history; // model::conv_history_rows by tensor
};

// `rows` in batch order: rows[b] is batch row b (the accesses it logs name b).
std::optional<Finding> run_forward(const ForwardContext& ctx, std::span<const ForwardRow> rows);

} // namespace mc::oracle::engine
