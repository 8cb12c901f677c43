// The copy of one state of one request, as tensor slices (REFERENCE.md 2, "Copy of one state").
//
// - conv SD: `state[src, bias:, :] -> state[dst, :w - bias, :]` (whole token rows);
// - conv DS: `state[src, :, bias:] -> state[dst, :, :w - bias]` (the tail of every dim row);
// - temporal: `state[src] -> state[dst]`, the natural elements only (the decision's src block
//   is already `bt[src_col + bias]`).
// Source and destination may be one physical block (a same-block shift, or two columns
// aliasing one block under prefix caching). The result must be memmove's (class D, #50729),
// so the source slice is evaluated into a temporary before anything is written.
#pragma once

#include "model/arena.h"
#include "model/launch.h"
#include "model/layout.h"

#include <span>
#include <vector>

namespace mc::oracle {

// Applies each decision, in order, to the arena of `layout` that holds its tensor.
void apply_copies(const model::Layout& layout, std::vector<model::Arena>& arenas,
                  std::span<const model::CopyDecision> decisions);

} // namespace mc::oracle
