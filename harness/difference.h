// The first difference of one engine step between the oracle and a backend, as one structured
// record that every caller (campaign, case, run, replay, library, shrinker) prints the same way:
// launches (count, kind, status), copy decisions, every per-request array, then every arena
// byte named by tensor (group, layer, state), block and byte range. A broken oracle invariant
// (a finding) is a difference too, of kind "finding:<FindingKind>".
#pragma once

#include "gpu/engine/engine_runner.h"
#include "model/layout.h"
#include "model/step.h"
#include "oracle/engine/finding.h"
#include "oracle/engine/runner.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace mc::harness {

struct Difference {
  std::string kind; // launch_count, launch_kind, status, decision, array, arena, rejected,
                    // finding:<FindingKind>
  std::int64_t step = -1;
  std::int32_t launch = -1; // index of the launch within the step
  std::string launch_kind;
  std::string request;
  std::string array; // for kind "array": its name and index
  std::string field; // for kind "expectation": the field of the trace's `expect` object
  std::int32_t tensor = -1, group = -1, layer = -1, state = -1;
  std::int64_t block = -1;
  std::int64_t byte_begin = -1, byte_end = -1; // within the block (arena) or the copy
  std::string text;                            // the whole difference in one line
  bool is_finding() const { return kind.starts_with("finding:"); }
};

nlohmann::ordered_json to_json(const Difference& d);
// The inverse of to_json (an outcome sent back by an isolated child process).
Difference difference_from_json(const nlohmann::ordered_json& j);

// `d.text` without its leading "step N: " (a caller that names the step itself).
std::string text_after_step(const Difference& d);

// The records of one step: launches, decisions, arrays. Text "step N: launch i (kind): ...".
std::optional<Difference> difference_of_step(const model::Layout& layout, const model::Step& step,
                                             const oracle::engine::StepRecord& oracle_record,
                                             const gpu::engine::StepRecord& backend_record);

// The forward's side of one step, before its launches and arenas: the first field of the
// metadata the two sides built that differs (kind "metadata", naming the row and the field),
// else the GPU forward's first wrong read (kind "forward-read") or the module's forward kernels'
// first wrong access (kind "forward-kernel"). Text "step N: ...".
std::optional<Difference> difference_of_forward(const model::Step& step,
                                                const oracle::engine::StepRecord& oracle_record,
                                                const gpu::engine::StepRecord& backend_record);

// The differing bytes [at, end) of arena `arena`, named by tensor, block and range within the
// block (or "outside every state").
Difference arena_difference(const model::Layout& layout, std::int32_t arena, std::int64_t at,
                            std::int64_t end);

// A broken oracle invariant; its text is the finding's message.
Difference difference_of_finding(const oracle::engine::Finding& finding);

} // namespace mc::harness
