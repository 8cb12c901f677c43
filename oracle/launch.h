// The CPU oracle of one kernel launch (DESIGN.md, "Kernel level"; model/LAUNCH_KINDS.md).
//
// run_launch computes what any backend must produce for a LaunchCase of any kind: the
// arenas after the launch (copies of the inputs with the copies applied), every
// per-request array after the launch, the copy decisions sorted by (batch_row, tensor),
// and the status (batch_copy reports a DS conv copy with bias > 0 as unsupported and
// changes nothing). It is written at the level of the seeds' Python: decisions per request
// row from the launch-time snapshot of the arrays, then tensor-slice copies over typed
// Eigen views of the arena bytes. It shares no code with gpu/ (the two walls).
#pragma once

#include "model/launch.h"

namespace mc::oracle {

// Throws mc::model::InputError, naming request row, tensor and index, for invalid inputs
// (LAUNCH_KINDS.md, "Validity"). The case is not modified. Implemented as
// run_launch_in_place on a clone of the case, so both share one code path.
mc::model::LaunchResult run_launch(const mc::model::LaunchCase& launch_case);

// The same launch applied to the case itself, for callers that run many launches over one
// set of arenas (the engine oracle): no arena is cloned, mapped or unmapped.
// - Everything is validated before anything is written: an InputError leaves the case
//   untouched (arenas and arrays).
// - On success the case's arenas hold the bytes after the launch and its request arrays the
//   arrays after it; batch_copy's unsupported status changes nothing, as run_launch.
// - The result holds status, reason and decisions only: its `arenas` and `requests` are
//   EMPTY (they are the case's own, read them there).
// - `copies` = Copies::decide_only leaves the arenas as they are: the caller applies the
//   decisions to states it keeps elsewhere (the engine oracle's meanings).
enum class Copies : bool { apply, decide_only };
mc::model::LaunchResult run_launch_in_place(mc::model::LaunchCase& launch_case,
                                            Copies copies = Copies::apply);

} // namespace mc::oracle
