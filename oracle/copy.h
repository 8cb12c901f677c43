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

#include <cstdint>

namespace mc::oracle {

// Applies `decision` to the arena that holds `tensor` (`num_blocks` blocks).
void apply_copy(model::Arena& arena, const model::StateTensor& tensor, std::int64_t num_blocks,
                const model::CopyDecision& decision);

} // namespace mc::oracle
