// The whole-block copies of partial-hash hits (model::BlockCopy), over host arenas: what vLLM's
// copy_kv_cache_blocks_inplace does before a step's kernels, for the oracle and the host
// executor alike. A copy has no decision in it (the block manager chose both blocks), so both
// sides of the wall run this one; the cuda executor copies the same ranges on the device.
#pragma once

#include "model/arena.h"
#include "model/layout.h"
#include "model/step.h"

#include <span>
#include <vector>

namespace mc::model {

// The source and destination ranges of one copy, one pair per state tensor of its group.
struct BlockCopyRange {
  ArenaRange src;
  ArenaRange dst;
};
std::vector<BlockCopyRange> block_copy_ranges(const Layout& layout, const BlockCopy& copy);

// Throws InputError naming the copy when a group or block is outside the layout, or when a
// block is both a source and a destination of `copies` (model::Step::block_copies).
void validate_block_copies(const Layout& layout, std::span<const BlockCopy> copies);

// Every source read before any destination is written, as vLLM's gather then scatter.
void copy_blocks(const Layout& layout, std::span<Arena> arenas, std::span<const BlockCopy> copies);

} // namespace mc::model
