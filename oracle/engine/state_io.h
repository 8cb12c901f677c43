// Reading, checking and writing the stamps of one block of one state tensor
// (model/FORWARD.md), straight on the arena's bytes: these run several times per request and
// step, so they build no view and call nothing per element but the stamp itself.
//
// A check returns nothing when the block holds what it should, else one sentence naming the
// first wrong element and, for a temporal state, which state it holds instead when that is
// the state after another count of the same request (an off-by-some read shows as such).
#pragma once

#include "model/arena.h"
#include "model/layout.h"
#include "model/stamps.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace mc::oracle::engine {

// The tokens a conv state may hold: positions [first, first + head.size() + tail.size()) of
// one sequence, in two pieces (the committed tokens, then the step's scheduled ones, say).
// Every other position holds no token: its stamp is 0.
struct TokenWindow {
  std::int64_t first = 0;
  std::span<const std::int32_t> head;
  std::span<const std::int32_t> tail = {};

  std::optional<std::int32_t> at(std::int64_t position) const {
    auto i = static_cast<std::size_t>(position - first);
    if (position < first) return std::nullopt;
    if (i < head.size()) return head[i];
    i -= head.size();
    if (i < tail.size()) return tail[i];
    return std::nullopt;
  }
};

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
                                      const TokenWindow& tokens);
// Conv write: row r in [0, L) gets position running - history + r (0 where no token).
void write_conv(const BlockRef& ref, std::int64_t history, std::int64_t running,
                const TokenWindow& tokens);

} // namespace mc::oracle::engine
