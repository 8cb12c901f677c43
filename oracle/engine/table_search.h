// The searches of a block-table row the invariant checker makes after every step, each in two
// implementations (structures.h): plain, a linear search from the front, and fast. Defined
// here, inline: they run once per logged access.
#pragma once

#include "model/block_table.h"
#include "model/errors.h"
#include "oracle/engine/structures.h"

#include <algorithm>
#include <cstdint>
#include <span>

namespace mc::oracle::engine {

// The first column where `got` (the runner's row) disagrees with a real entry of `want` (the
// scheduler's table), or -1; a column past the end of `got` disagrees with any real entry.
inline std::int64_t first_disagreement_plain(std::span<const std::int32_t> want,
                                             std::span<const std::int32_t> got) {
  for (std::size_t j = 0; j < want.size(); ++j)
    if (want[j] != model::kNullBlockId && (j >= got.size() || got[j] != want[j]))
      return static_cast<std::int64_t>(j);
  return -1;
}

// The same; the fast one compares the whole row without an exit per entry (rows agree on
// almost every step) and searches only when it does not.
inline std::int64_t first_disagreement(std::span<const std::int32_t> want,
                                       std::span<const std::int32_t> got, Structures structures) {
  if (structures == Structures::reference) return first_disagreement_plain(want, got);
  const std::size_t n = std::min(want.size(), got.size());
  bool differs = false;
  for (std::size_t j = 0; j < n; ++j)
    differs |= (want[j] != model::kNullBlockId) & (got[j] != want[j]);
  for (std::size_t j = n; j < want.size();
       ++j) // past the runner's row: every real entry is missing
    differs |= want[j] != model::kNullBlockId;
  if (!differs) return -1;
  const std::int64_t j = first_disagreement_plain(want, got);
  MC_ASSERT(j >= 0);
  return j;
}

// Whether `ids` holds `block_id` anywhere. `col` is a hint: the column where an access found
// the block in the runner's row, which agrees with the table wherever the table is real (the
// row check), so the fast search tries that column first, then searches from the end (a
// request's live blocks sit at the tail of its table, nulls before them).
inline bool holds(std::span<const std::int32_t> ids, std::int32_t col, std::int32_t block_id,
                  Structures structures) {
  if (structures == Structures::reference)
    return std::find(ids.begin(), ids.end(), block_id) != ids.end();
  if (col >= 0 && static_cast<std::size_t>(col) < ids.size() &&
      ids[static_cast<std::size_t>(col)] == block_id)
    return true;
  return std::find(ids.rbegin(), ids.rend(), block_id) != ids.rend();
}

} // namespace mc::oracle::engine
