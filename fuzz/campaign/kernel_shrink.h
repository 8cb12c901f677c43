// Shrinking a failing launch case when the backend may fail only on some runs
// (fuzz/findings.h). A candidate counts as failing when it fails, with the finding's
// signature key, in at least one of candidate_runs() runs; the case that is saved is the
// smallest accepted candidate that fails in at least half of its reruns, else the original.
#pragma once

#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/findings.h"
#include "fuzz/gen_launch.h"

#include <rapidcheck.h>

#include <functional>
#include <string>

namespace mc::fuzz {

// One run of a case on the backend under test.
using CaseJudge = std::function<CaseVerdict(const LaunchSpec&)>;

struct ShrinkOutcome {
  LaunchSpec spec;     // what to save
  RunTally saved_runs; // its reruns (the original's own runs when nothing smaller reproduced)
  bool kept = false;   // spec is a shrunk candidate (false: the original)
  std::int32_t steps = 0; // accepted candidates
  std::int32_t tried = 0; // candidates run
  bool timed_out = false; // limits.seconds_max stopped the descent or the verification
};

ShrinkOutcome shrink_finding(const rc::Shrinkable<LaunchSpec>& original,
                             const RunTally& original_runs, const std::string& key,
                             const CaseJudge& judge, int reruns, const ShrinkLimits& limits);

} // namespace mc::fuzz
