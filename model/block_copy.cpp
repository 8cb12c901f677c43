#include "model/block_copy.h"

#include "model/errors.h"

#include <algorithm>
#include <cstring>

namespace mc::model {

std::vector<BlockCopyRange> block_copy_ranges(const Layout& layout, const BlockCopy& copy) {
  std::vector<BlockCopyRange> ranges;
  for (const StateTensor& t : layout.tensors) {
    if (t.group != copy.group) continue;
    const auto range = [&t](std::int32_t block) {
      return ArenaRange{.arena = t.arena,
                        .offset_bytes = t.block_offset_bytes(block),
                        .size_bytes = t.natural_bytes};
    };
    ranges.push_back({.src = range(copy.src), .dst = range(copy.dst)});
  }
  return ranges;
}

void validate_block_copies(const Layout& layout, std::span<const BlockCopy> copies) {
  for (const BlockCopy& c : copies) {
    if (c.group < 0 || c.group >= layout.num_groups())
      fail_input("block_copies: group {} of a copy is not a group of the layout (0..{})", c.group,
                 layout.num_groups() - 1);
    for (const std::int32_t block : {c.src, c.dst})
      if (block <= 0 || block >= layout.spec.num_blocks)
        fail_input("block_copies: block {} of a copy of group {} is not a block of the pool "
                   "(1..{})",
                   block, c.group, layout.spec.num_blocks - 1);
    const bool chained = std::any_of(copies.begin(), copies.end(), [&](const BlockCopy& o) {
      return o.group == c.group && o.src == c.dst;
    });
    if (chained)
      fail_input("block_copies: block {} of group {} is both a copy's destination and a "
                 "source in one step",
                 c.dst, c.group);
  }
}

void copy_blocks(const Layout& layout, std::span<Arena> arenas, std::span<const BlockCopy> copies) {
  // No block is both a source and a destination (validate_block_copies), so copying one by
  // one reads every source before it is written.
  for (const BlockCopy& c : copies)
    for (const BlockCopyRange& r : block_copy_ranges(layout, c)) {
      std::byte* base = arenas[static_cast<std::size_t>(r.src.arena)].data();
      std::memmove(base + r.dst.offset_bytes, base + r.src.offset_bytes,
                   static_cast<std::size_t>(r.src.size_bytes));
    }
}

} // namespace mc::model
