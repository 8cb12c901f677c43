// Block tables: per mamba group, one int32 row of physical block ids per request row.
//
// Names keep the two indices apart everywhere in mambacheck: a *column* (`col`,
// `src_col`, `state_idx`) indexes a row of the table; a *block id* (`block_id`,
// `src_block_id`) is the physical block that column holds. 0 is the null block,
// -1 a pad slot (never confuse them: class D, #50021). Rows have `row_width`
// meaningful entries and are `row_stride` elements apart (stride >= width); the
// gap is filled with kStrideGapFill so that a read past the width shows.
#pragma once

#include "model/errors.h"

#include <cstdint>
#include <vector>

namespace mc::model {

inline constexpr std::int32_t kNullBlockId = 0;
inline constexpr std::int32_t kPadSlot = -1;
inline constexpr std::int32_t kStrideGapFill = 0x7EADBEEF;

struct BlockTable {
  std::int32_t num_rows = 0;
  std::int32_t row_width = 0;  // meaningful columns per row
  std::int32_t row_stride = 0; // elements between rows, >= row_width
  std::vector<std::int32_t> block_ids; // num_rows * row_stride

  static BlockTable make(std::int32_t num_rows, std::int32_t row_width, std::int32_t row_stride) {
    MC_ASSERT(num_rows >= 0 && row_width >= 0 && row_stride >= row_width);
    BlockTable t{.num_rows = num_rows, .row_width = row_width, .row_stride = row_stride};
    t.block_ids.assign(static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(row_stride),
                       kStrideGapFill);
    for (std::int32_t r = 0; r < num_rows; ++r)
      for (std::int32_t c = 0; c < row_width; ++c) t.at(r, c) = kPadSlot;
    return t;
  }
  std::int32_t& at(std::int32_t row, std::int32_t col) {
    return block_ids[static_cast<std::size_t>(row) * static_cast<std::size_t>(row_stride) +
                     static_cast<std::size_t>(col)];
  }
  std::int32_t at(std::int32_t row, std::int32_t col) const {
    return block_ids[static_cast<std::size_t>(row) * static_cast<std::size_t>(row_stride) +
                     static_cast<std::size_t>(col)];
  }
  bool operator==(const BlockTable&) const = default;
};

// One table per mamba group; all share num_rows, row_width and row_stride (the
// kernels receive one row stride for every group, as the seed asserts).
struct BlockTables {
  std::vector<BlockTable> groups;
  bool operator==(const BlockTables&) const = default;
};

} // namespace mc::model
