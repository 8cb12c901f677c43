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
// (LAUNCH_KINDS.md, "Validity"). The case is not modified.
mc::model::LaunchResult run_launch(const mc::model::LaunchCase& launch_case);

} // namespace mc::oracle
