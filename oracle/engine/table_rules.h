// Two rules of the block manager (REFERENCE.md 3) held against the step the runner gets, the
// same way whether the oracle's scheduler made the step or a trace gave it:
// - prefix hit: a new or resumed request starts from the longest prefix that ends on a block
//   boundary (a multiple of the mamba block size B), whose boundary block is cached in every
//   group, and that leaves the last known token to compute (a hit never covers num_tokens);
// - speculative blocks: when a table grows and the running position passes old speculative
//   blocks, those blocks move to the end of the table (the appended ids carry them): they
//   hold draft states, never a boundary state, so none may stay before the running block.
// A hit shorter than the longest recomputes what the cache held; a longer one reads a state
// nothing cached. A speculative block left behind sits where the block manager caches boundary
// states. Each is a finding of its own kind at the step that takes it.
#pragma once

#include "model/layout.h"
#include "model/stamps.h"
#include "model/step.h"
#include "oracle/engine/block_pool.h"
#include "oracle/engine/finding.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace mc::oracle::engine {

// The longest prefix hit in tokens (0: none) for a request with `num_tokens` tokens (prompt and
// outputs so far) whose running hashes are `hashes` (hashes[p]: the first p tokens; positions
// past its end are not looked at): the largest q * unit <= num_tokens - 1 whose boundary hash is
// cached in every pool (`unit` 0: block_size; `strict`: BlockPool::lookup's).
std::int32_t longest_prefix_hit(std::span<const BlockPool> pools, std::int32_t block_size,
                                std::span<const model::TokenHash> hashes, std::int32_t num_tokens,
                                std::int32_t unit = 0, bool strict = false);

// A finding of kind wrong_prefix_hit when `hit_tokens` differs from `longest_tokens`.
std::optional<Finding> check_prefix_hit(const model::Layout& layout, std::int64_t step,
                                        const std::string& req_id, std::int32_t hit_tokens,
                                        std::int32_t longest_tokens);

// Align mode: a running request's table as its block manager holds it (`held`, recorded) keeps
// no state block below the previous running one once that is stale: every column under
// cdiv(processed, B) - 1 is null, `processed` the tokens committed when the step was planned
// (vLLM frees by that count since #47728; #55450 fixed a retirement that stopped at a null gap
// and kept older states). A finding of kind excess_retention naming the group and the column.
std::optional<Finding> check_retention(const model::Layout& layout, std::int64_t step,
                                       const std::string& req_id, const model::GroupBlockIds& held,
                                       std::int32_t processed);

// The first running request of `step` whose appended ids leave an old speculative block before
// its new running position (align mode), as a finding of kind spec_blocks_not_moved. `row_of`:
// a request's row before the step as the runner holds it (the ids of every step appended, the
// whole table of its last first allocation), or null when unknown (then nothing is checked).
template <class RowOf>
std::optional<Finding> check_spec_blocks_moved(const model::Layout& layout, const model::Step& step,
                                               RowOf&& row_of);

// One request's growth in one group: the old speculative block left behind, if any.
std::optional<Finding> check_group_growth(const model::Layout& layout, std::int64_t step,
                                          const std::string& req_id, std::int32_t group,
                                          std::span<const std::int32_t> old_row,
                                          std::span<const std::int32_t> appended);

template <class RowOf>
std::optional<Finding> check_spec_blocks_moved(const model::Layout& layout, const model::Step& step,
                                               RowOf&& row_of) {
  if (layout.config.mode != model::CacheMode::align || layout.config.num_spec_blocks == 0)
    return std::nullopt;
  for (const model::CachedRequestData& c : step.cached_requests) {
    if (c.resumed) continue;
    const model::GroupBlockIds* row = row_of(c.req_id);
    if (row == nullptr || row->size() != c.new_block_ids.size()) continue;
    for (std::size_t g = 0; g < row->size(); ++g)
      if (auto f = check_group_growth(layout, step.index, c.req_id, static_cast<std::int32_t>(g),
                                      (*row)[g], c.new_block_ids[g]))
        return f;
  }
  return std::nullopt;
}

} // namespace mc::oracle::engine
