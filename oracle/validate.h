// What a launch case must satisfy before the oracle runs it (LAUNCH_KINDS.md, "Validity").
//
// Generators never produce invalid cases and kernels may assume validity; the oracle checks
// and throws InputError with one message naming the request (batch row, slot), the tensor
// (group, layer, state) and the bad index. Two stages:
// - before any decision, the shape of the case: model::validate_launch_shape
//   (model/launch_kinds.h), the checks every consumer of a case shares.
// - validate_no_overlap, after the decisions: no bytes written by one (request, tensor) copy
//   are read or written by another, so the result cannot depend on program order (within
//   one copy, overlap is memmove and allowed). Column and block-id ranges are checked where
//   the table is read (copy_plan.h).
#pragma once

#include "model/launch.h"

#include <vector>

namespace mc::oracle {

void validate_no_overlap(const model::Layout& layout,
                         const std::vector<model::CopyDecision>& decisions);

} // namespace mc::oracle
