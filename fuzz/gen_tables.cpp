// Block-table generation (see gen_tables.h).
#include "fuzz/gen_tables.h"

#include "fuzz/gen_pick.h"
#include "model/errors.h"
#include "model/prng.h"

#include <algorithm>
#include <unordered_set>

namespace mc::fuzz::detail {
namespace {

using I32 = std::int32_t;
using model::mix_seed;
using model::SplitMix64;

enum Variant : int { plain, alias_conv, alias_temporal, null_read, shared_read, prefix_dup };

struct RowBuilder {
  model::BlockTable& table;
  I32 row;
  I32 next_id;                    // next private virtual id
  const std::vector<I32>& shared; // read-only prefix blocks of this group

  I32& at(I32 col) { return table.at(row, col); }
  I32 take() { return next_id++; }
};

// Columns the row's copies and live window touch, sorted and unique.
std::vector<I32> touched_cols(const RowShape& shape) {
  std::vector<I32> cols = shape.live_cols;
  if (shape.copies) {
    cols.push_back(shape.src_col);
    cols.push_back(shape.src_col + shape.bias);
    cols.push_back(shape.dst_col);
  }
  std::sort(cols.begin(), cols.end());
  cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
  return cols;
}

// Nulls before the first touched column, pads (or nulls) after the last, private blocks at
// the touched ones.
void lay_out_row(RowBuilder& rb, const std::vector<I32>& cols) {
  const I32 width = rb.table.row_width;
  const I32 tail = pick_bool(70) ? model::kPadSlot : model::kNullBlockId;
  for (I32 c = 0; c < width; ++c)
    rb.at(c) = c > cols.back() ? tail : model::kNullBlockId;
  for (const I32 c : cols)
    rb.at(c) = rb.take();
}

// Applies one variant; every change keeps the written block private to the row.
void apply_variant(RowBuilder& rb, const RowShape& shape, const std::vector<I32>& cols,
                   int variant) {
  const I32 src = shape.src_col;
  const I32 tsrc = shape.src_col + shape.bias; // the temporal source column
  const I32 dst = shape.dst_col;
  switch (variant) {
  case alias_conv: // two columns, one block: dst aliases the conv source (same-block shift)
    if (shape.copies && src != dst) rb.at(dst) = rb.at(src);
    break;
  case alias_temporal:
    if (shape.copies && tsrc != dst) rb.at(dst) = rb.at(tsrc);
    break;
  case null_read: // the null block is valid to read at kernel level
    if (shape.copies && src != dst) rb.at(src) = model::kNullBlockId;
    if (shape.copies && tsrc != dst && pick_bool(50)) rb.at(tsrc) = model::kNullBlockId;
    break;
  case shared_read:
    if (shape.copies && src != dst && !rb.shared.empty())
      rb.at(src) =
          rb.shared[static_cast<std::size_t>(pick_int(0, static_cast<I32>(rb.shared.size()) - 1))];
    break;
  case prefix_dup: {
    // A prefix hit before the running block, and an untouched column repeating a read block.
    if (cols.front() > 0 && !rb.shared.empty())
      rb.at(pick_int(0, cols.front() - 1)) = rb.shared.front();
    const I32 spare = pick_int(0, rb.table.row_width - 1);
    if (!std::binary_search(cols.begin(), cols.end(), spare)) rb.at(spare) = rb.at(cols.front());
    break;
  }
  default:
    break;
  }
}

void build_unmapped_row(RowBuilder& rb) {
  const I32 fill = pick_bool(50) ? model::kPadSlot : model::kNullBlockId;
  for (I32 c = 0; c < rb.table.row_width; ++c)
    rb.at(c) = fill;
}

std::vector<I32> sample_distinct(I32 count, std::int64_t num_blocks, std::uint64_t seed) {
  SplitMix64 rng{seed};
  std::vector<I32> out;
  out.reserve(static_cast<std::size_t>(count));
  if (num_blocks - 1 <= (std::int64_t{1} << 22)) { // partial Fisher-Yates over [1, num_blocks)
    std::vector<I32> ids(static_cast<std::size_t>(num_blocks - 1));
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<I32>(i + 1);
    for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
      std::swap(ids[i], ids[i + rng.below(ids.size() - i)]);
      out.push_back(ids[i]);
    }
    return out;
  }
  std::unordered_set<I32> seen;
  while (static_cast<I32>(out.size()) < count) {
    const auto id = static_cast<I32>(1 + rng.below(static_cast<std::uint64_t>(num_blocks - 1)));
    if (seen.insert(id).second) out.push_back(id);
  }
  return out;
}

} // namespace

VirtualTables pick_virtual_tables(const std::vector<RowShape>& shapes, std::int32_t num_groups,
                                  std::int32_t row_width, std::int32_t row_stride,
                                  const TableVariantWeights& weights) {
  const TableVariantWeights& w = weights;
  const auto num_rows = static_cast<I32>(shapes.size());
  VirtualTables out;
  for (I32 g = 0; g < num_groups; ++g) {
    model::BlockTable table = model::BlockTable::make(num_rows, row_width, row_stride);
    std::vector<I32> shared;
    for (I32 i = pick_int(0, 3); i > 0; --i)
      shared.push_back(static_cast<I32>(shared.size()) + 1);
    I32 next_id = static_cast<I32>(shared.size()) + 1;
    for (I32 b = 0; b < num_rows; ++b) {
      RowBuilder rb{table, b, next_id, shared};
      const RowShape& shape = shapes[static_cast<std::size_t>(b)];
      const std::vector<I32> cols = touched_cols(shape);
      if (!shape.mapped || cols.empty()) {
        build_unmapped_row(rb);
      } else {
        lay_out_row(rb, cols);
        apply_variant(rb, shape, cols,
                      pick_weighted({w.plain, w.alias_conv, w.alias_temporal, w.null_read,
                                     w.shared_read, w.prefix_dup}));
      }
      next_id = rb.next_id;
    }
    out.tables.groups.push_back(std::move(table));
    out.num_virtual.push_back(next_id - 1);
  }
  return out;
}

void map_to_physical(VirtualTables& tables, std::int64_t num_blocks, BlockIdPolicy policy,
                     std::uint64_t seed) {
  for (std::size_t g = 0; g < tables.tables.groups.size(); ++g) {
    model::BlockTable& t = tables.tables.groups[g];
    const I32 count = tables.num_virtual[g];
    MC_ASSERT(count < num_blocks);
    std::vector<I32> physical(static_cast<std::size_t>(count) + 1, 0);
    std::vector<I32> sample;
    if (policy == BlockIdPolicy::scattered)
      sample = sample_distinct(count, num_blocks, mix_seed(seed, g, 0));
    for (I32 v = 1; v <= count; ++v) {
      const auto vi = static_cast<std::size_t>(v);
      physical[vi] = policy == BlockIdPolicy::low    ? v
                     : policy == BlockIdPolicy::high ? static_cast<I32>(num_blocks - v)
                                                     : sample[vi - 1];
    }
    for (I32 r = 0; r < t.num_rows; ++r)
      for (I32 c = 0; c < t.row_width; ++c)
        if (t.at(r, c) > 0) t.at(r, c) = physical[static_cast<std::size_t>(t.at(r, c))];
  }
}

} // namespace mc::fuzz::detail
