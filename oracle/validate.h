// What a launch case must satisfy before the oracle runs it (LAUNCH_KINDS.md, "Validity").
//
// Generators never produce invalid cases and kernels may assume validity; the oracle checks
// and throws InputError with one message naming the request (batch row, slot), the tensor
// (group, layer, state) and the bad index. Two stages:
// - validate_case, before any decision: arenas and block tables match the layout, the
//   per-request arrays a kind reads have the lengths of the "Indexing" table, idx_mapping
//   entries lie in [-1, num_slots) with no slot taken twice.
// - validate_no_overlap, after the decisions: no bytes written by one (request, tensor) copy
//   are read or written by another, so the result cannot depend on program order (within
//   one copy, overlap is memmove and allowed). Column and block-id ranges are checked where
//   the table is read (copy_plan.h).
#pragma once

#include "model/launch.h"

#include <vector>

namespace mc::oracle {

void validate_case(const model::LaunchCase& launch_case);

void validate_no_overlap(const model::Layout& layout,
                         const std::vector<model::CopyDecision>& decisions);

} // namespace mc::oracle
