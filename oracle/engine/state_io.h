// Reading, checking and writing the stamps of one block of one state tensor
// (model/FORWARD.md), over the oracle's typed Eigen views of the arena (oracle/state_view.h).
//
// A check returns nothing when the block holds what it should, else one sentence naming the
// first wrong element and, for a temporal state, which state it holds instead when that is
// the state after another count of the same request (an off-by-some read shows as such).
#pragma once

#include "model/arena.h"
#include "model/layout.h"
#include "model/stamps.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace mc::oracle::engine {

// The token at a position, or nullopt when the position holds no token (a zero stamp).
using TokenAt = std::function<std::optional<std::int32_t>(std::int64_t position)>;

struct BlockRef {
  model::Arena* arena = nullptr;
  const model::StateTensor* tensor = nullptr;
  std::int32_t tensor_index = 0;
  std::int64_t num_blocks = 0;
  std::int32_t block_id = 0;
};

// Temporal: the natural bytes equal fill_temporal(hash). `known_hashes` (the request's
// hashes by count) only serve to name what the block holds instead.
std::optional<std::string> check_temporal(const BlockRef& ref, model::TokenHash hash,
                                          std::span<const model::TokenHash> known_hashes);
void write_temporal(const BlockRef& ref, model::TokenHash hash);

// Conv: the state after `num_tokens` tokens at token offset `offset`: rows [offset,
// min(offset + history, L)) hold the stamps of positions num_tokens - history - offset + r.
std::optional<std::string> check_conv(const BlockRef& ref, std::int64_t history,
                                      std::int64_t num_tokens, std::int64_t offset,
                                      const TokenAt& token_at);
// Conv write: row r in [0, L) gets position running - history + r (0 where no token).
void write_conv(const BlockRef& ref, std::int64_t history, std::int64_t running,
                const TokenAt& token_at);

} // namespace mc::oracle::engine
