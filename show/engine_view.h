// The picture of an engine run (`mambacheck show TRACE`, the report.html of an engine
// counterexample): a timeline with one lane per request and one column per step (scheduled
// tokens, drafts and accepted counts, blocks allocated and freed, prefix hits, preemption,
// resume and finish, the pre- and post-step copies as arrows), the first step where the oracle
// and the backend disagree (or where an oracle invariant broke: a cached block that stopped
// matching the sequential ground truth) marked and linked to its byte view; a click on a step
// shows what the oracle believes happened there (the `replay --explain` table) and, for the
// failing step, its block-table rows with the copies drawn.
//
// Everything drawn comes from harness::StepView (the oracle's own account, step_view.h) and
// from the replay's Difference or Finding: nothing is decided here.
#pragma once

#include "harness/difference.h"
#include "harness/step_view.h"
#include "model/layout.h"
#include "show/byte_grid.h"
#include "show/html.h"

#include <optional>
#include <string>
#include <vector>

namespace mc::show {

struct EngineReport {
  const model::Layout& layout;
  std::vector<harness::StepView> views;       // every step the oracle ran, in order
  std::optional<harness::Difference> failure; // the first difference or finding
  std::string outcome;                        // the replay's one-line summary
  ArenaDiff bytes;                            // oracle vs backend after the failing step
  std::optional<BlockDiff> finding_block;     // a finding's block as the oracle holds it
  std::string actual_name = "backend";
  Header header;
};

inline constexpr std::size_t kStepsDrawnMax = 160;
inline constexpr std::size_t kLanesDrawnMax = 64;

std::string engine_report_html(const EngineReport& report);

} // namespace mc::show
