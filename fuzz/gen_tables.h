// Block-table generation: blocks for the columns each row touches, kept valid.
//
// Rows get private physical blocks for every column their copies read or write, the
// null block before their first touched column and pads after the last (as the block
// manager lays tables out, REFERENCE.md 3). Per (group, row) a variant adds what
// prefix caching and the null block bring: the destination aliasing a source block
// (same-block shifts, two columns one block), a source that is the null block or a
// prefix block shared read-only with other rows. A written block is always private to
// its row, so no copy of one request overlaps another's (the validity rule).
// Tables are first built on virtual ids (1..n per group) and then mapped to physical
// ids low (1, 2, ...), high (near num_blocks) or scattered. Call inside rc::gen::exec.
#pragma once

#include "fuzz/gen_rows.h"
#include "model/block_table.h"

#include <cstdint>
#include <vector>

namespace mc::fuzz::detail {

enum class BlockIdPolicy : std::uint8_t { low, high, scattered };

struct VirtualTables {
  model::BlockTables tables;             // cells > 0 are virtual ids
  std::vector<std::int32_t> num_virtual; // per group: ids 1..num_virtual[g] are in use
};

VirtualTables pick_virtual_tables(const std::vector<RowShape>& shapes, std::int32_t num_groups,
                                  std::int32_t row_width, std::int32_t row_stride,
                                  const TableVariantWeights& weights);

// Maps the virtual ids of every group to distinct physical ids in [1, num_blocks).
void map_to_physical(VirtualTables& tables, std::int64_t num_blocks, BlockIdPolicy policy,
                     std::uint64_t seed);

} // namespace mc::fuzz::detail
