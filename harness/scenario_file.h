// Scripted scenarios (`mambacheck scenario FILE`): a small JSON file that says what to run
// instead of a trace with token ids: a preset and cache config, scheduler sizes, requests (prompt
// length, a shared prefix, arrival step, output length, how many drafts each decode step
// accepts) and optional per-step expectations. expand_scenario runs the oracle engine's
// scheduler on it and returns the trace it produced, expectations attached to their steps
// (FORMAT.md `expect`), ready to be written and replayed on the oracle and a backend.
//
// Format (docs/scenarios.md): every field optional but `preset` and `requests`.
//   {"preset": "tiny-mamba2", "num_blocks": 48,
//    "config": {"mamba_block_size": 560, "attn_block_size": 16, "num_spec_tokens": 3,
//               "mode": "align", "conv_layout": "SD", "runner": "v1"},
//    "v1_copy_path": "precopy", "token_budget": 2800, "max_running": 8, "steps_max": 2000,
//    "requests": [{"id": "a", "prompt_len": 5600, "output_len": 40, "arrival_step": 0,
//                  "shared_prefix": {"family": 1, "len": 5600}, "accept": 3}],
//    "expect": [{"step": 1, "request": "a", "pre_copy": [4, 9], "state_col": 9}]}
// `accept` is num_accepted of each decode step of the request (1 + the drafts that match), a
// constant or a list used in order whose last entry repeats; a decode with fewer drafts accepts
// at most all of them. Requests of one family share their first `len` tokens.
#pragma once

#include "model/step.h"
#include "oracle/engine/options.h"
#include "scenarios/trace.h"

#include <filesystem>
#include <vector>

namespace mc::harness {

struct ExpandedScenario {
  scenarios::TraceHeader header;
  std::vector<model::Step> steps;
  oracle::engine::V1CopyPath v1_copy_path = oracle::engine::V1CopyPath::precopy;
  std::int64_t expectations = 0; // expect entries attached to steps
};

// Throws model::InputError naming the file and the field ("s.json: requests[1].accept: ...").
ExpandedScenario expand_scenario(const std::filesystem::path& file);

// Writes the expanded scenario as a trace (version 2 when it carries expectations).
void write_scenario_trace(const ExpandedScenario& scenario, const std::filesystem::path& trace);

} // namespace mc::harness
