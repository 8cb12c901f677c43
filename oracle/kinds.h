// The decisions of each launch kind, per request row (LAUNCH_KINDS.md, one section per kind;
// REFERENCE.md 2, "Decisions").
//
// Each function reads the per-request arrays of the case as they were when the launch
// started (the snapshot: every (request, state) program of the seed kernels reads the same
// `a`), writes the kind's outputs into `requests` (a copy of the inputs) and returns the
// row copies to make, in batch-row order. The copies themselves are copy_plan.h's and
// copy.h's; preprocess_align decides bookkeeping only and copies nothing.
#pragma once

#include "model/launch.h"
#include "oracle/copy_plan.h"

#include <vector>

namespace mc::oracle {

// V1 fused postprocess: running = computed + scheduled - drafts; reset in num_accepted_out.
std::vector<RowCopy> decide_postprocess(const model::LaunchCase& launch_case,
                                        model::RequestArrays& requests);

// V2 postprocess: running = new_num_computed - a + 1; reset written to num_accepted. Both
// table conventions: postprocess_align (tables by batch row) and
// postprocess_align_slot_tables (by slot).
std::vector<RowCopy> decide_postprocess_align(const model::LaunchCase& launch_case,
                                              model::RequestArrays& requests);

// Pre-step copy: src_col -> state_idx unless src_col < 0 or equal. precopy and
// precopy_slot_tables (V2, slot from idx_mapping, tables by batch row or by slot) and
// precopy_v1 (the V1 runner's launch without idx_mapping: rows are slots).
std::vector<RowCopy> decide_precopy(const model::LaunchCase& launch_case);

// V2 bookkeeping: src_col, token_bias (src_off), the new state_idx and the reset of a.
void decide_preprocess_align(const model::LaunchCase& launch_case, model::RequestArrays& requests);

// V1 flat copy plan: the same row copies as precopy, with rows indexed directly.
std::vector<RowCopy> decide_batch_copy(const model::LaunchCase& launch_case);

} // namespace mc::oracle
