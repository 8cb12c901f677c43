#include "oracle/engine/table_rules.h"

#include "model/block_table.h"
#include "model/errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace mc::oracle::engine {

std::int32_t longest_prefix_hit(std::span<const BlockPool> pools, std::int32_t block_size,
                                std::span<const model::TokenHash> hashes, std::int32_t num_tokens,
                                std::int32_t unit, bool strict) {
  // A unit: the attention groups' (a multiple of B), or a hash unit below B (a divisor of it).
  MC_ASSERT(block_size >= 1 && (unit == 0 || unit % block_size == 0 || block_size % unit == 0));
  const std::int32_t step = unit == 0 ? block_size : unit;
  // The last token is always computed: its logits sample the next one.
  const auto covered_max = static_cast<std::int32_t>(
      std::min<std::int64_t>(num_tokens - 1, static_cast<std::int64_t>(hashes.size()) - 1));
  for (std::int32_t end = covered_max / step * step; end > 0; end -= step) {
    const model::TokenHash boundary = hashes[static_cast<std::size_t>(end)];
    const bool everywhere = std::all_of(pools.begin(), pools.end(), [&](const BlockPool& pool) {
      return pool.lookup(boundary, strict).has_value();
    });
    if (everywhere) return end;
  }
  return 0;
}

std::optional<Finding> check_prefix_hit(const model::Layout& layout, std::int64_t step,
                                        const std::string& req_id, std::int32_t hit_tokens,
                                        std::int32_t longest_tokens) {
  if (hit_tokens == longest_tokens) return std::nullopt;
  const std::int32_t B = layout.config.mamba_block_size;
  return make_finding(
      layout, FindingKind::wrong_prefix_hit, step, req_id, -1, -1, -1,
      fmt::format("takes a prefix hit of {} tokens ({} blocks of {}), {} than the longest "
                  "cached block-aligned prefix of {} tokens",
                  hit_tokens, hit_tokens / B, B, hit_tokens < longest_tokens ? "shorter" : "longer",
                  longest_tokens),
      fmt::format("a hit of {} tokens", longest_tokens));
}

std::optional<Finding> check_retention(const model::Layout& layout, std::int64_t step,
                                       const std::string& req_id, const model::GroupBlockIds& held,
                                       std::int32_t processed) {
  if (layout.config.mode != model::CacheMode::align) return std::nullopt;
  const std::int32_t B = layout.config.mamba_block_size;
  const auto stale_below = static_cast<std::int32_t>(model::cdiv(std::max(processed, 0), B)) - 1;
  for (std::size_t g = 0; g < held.size(); ++g) {
    const auto end = std::min<std::int64_t>(stale_below, static_cast<std::int64_t>(held[g].size()));
    for (std::int64_t p = 0; p < end; ++p) {
      const std::int32_t block = held[g][static_cast<std::size_t>(p)];
      if (block == model::kNullBlockId) continue;
      std::int32_t kept = 0;
      bool gap_above = false; // a null between it and the stale threshold
      for (std::int64_t q = 0; q < end; ++q) {
        const bool null = held[g][static_cast<std::size_t>(q)] == model::kNullBlockId;
        kept += null ? 0 : 1;
        gap_above = gap_above || (q > p && null);
      }
      return make_finding(
          layout, FindingKind::excess_retention, step, req_id, -1, static_cast<std::int32_t>(p),
          block,
          fmt::format("group {} still holds block {} at column {} ({} block{} below column {}), "
                      "though {} tokens were committed when the step was planned: its state "
                      "is older than the previous running state, which no step reads{}",
                      g, block, p, kept, kept == 1 ? "" : "s", stale_below, processed,
                      gap_above ? "; a null column lies above it, where a retirement that walks "
                                  "down and stops at the first null gives up (vLLM #55450)"
                                : ""),
          fmt::format("columns 0..{} null (freed)", stale_below - 1));
    }
  }
  return std::nullopt;
}

std::optional<Finding> check_group_growth(const model::Layout& layout, std::int64_t step,
                                          const std::string& req_id, std::int32_t group,
                                          std::span<const std::int32_t> old_row,
                                          std::span<const std::int32_t> appended) {
  if (appended.empty()) return std::nullopt;
  const std::int32_t nsb = layout.config.num_spec_blocks;
  const auto old_len = static_cast<std::int32_t>(old_row.size());
  const auto new_len = old_len + static_cast<std::int32_t>(appended.size());
  const std::int32_t running = new_len - 1 - nsb; // the block manager's layout of the new table
  for (std::int32_t j = std::max(old_len - nsb, 0); j < std::min(old_len, running); ++j) {
    const std::int32_t block = old_row[static_cast<std::size_t>(j)];
    if (block == model::kNullBlockId) continue;
    if (std::find(appended.begin(), appended.end(), block) != appended.end()) continue;
    return make_finding(
        layout, FindingKind::spec_blocks_not_moved, step, req_id, -1, j, block,
        fmt::format("group {}: the table grows from {} to {} entries and the running block to "
                    "column {}, but the speculative block at column {} stays there (appended: "
                    "[{}])",
                    group, old_len, new_len, running, j, fmt::join(appended, ", ")),
        fmt::format("block {} moved to the end of the table", block));
  }
  return std::nullopt;
}

} // namespace mc::oracle::engine
