// The runner's decisions as specified (runner_decisions.h).
#include "gpu/engine/runner_decisions.h"

#include "model/errors.h"

#include <algorithm>
#include <numeric>

namespace mc::gpu::engine {

std::int32_t RunnerDecisions::prev_column(std::int32_t c, std::int32_t block_size) const {
  return static_cast<std::int32_t>(model::floor_div(c - 1, block_size));
}

std::int32_t RunnerDecisions::curr_column(std::int32_t end, std::int32_t block_size) const {
  return static_cast<std::int32_t>(model::cdiv(end, block_size) - 1);
}

std::vector<std::int32_t>
RunnerDecisions::precopy_idx_mapping(ArraysIndexedBy arrays,
                                     const std::vector<std::int32_t>& slots) const {
  if (arrays == ArraysIndexedBy::slot) return slots;
  std::vector<std::int32_t> rows(slots.size());
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

// The chunk may start mid-block (all mode does not align chunks to blocks), so the first
// boundary is the end of the chunk's first block, not c + B (#57266).
std::vector<AllModeBoundary> RunnerDecisions::all_mode_boundaries(std::int64_t c, std::int64_t n,
                                                                  std::int64_t block_size) const {
  MC_ASSERT(c >= 0);
  MC_ASSERT(n >= 1);
  MC_ASSERT(block_size >= 1);
  const std::int64_t first = c / block_size; // the block of the chunk's first token
  const std::int64_t count = model::cdiv(c + n, block_size) - 1 - first;
  std::vector<AllModeBoundary> out;
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t pos = (first + k + 1) * block_size;
    MC_ASSERT(c < pos);
    MC_ASSERT(pos < c + n);
    out.push_back({.col = static_cast<std::int32_t>(first + k), .pos = pos});
  }
  return out;
}

std::optional<AllModeRecord>
RunnerDecisions::all_mode_record(std::int32_t c, std::int32_t n, std::int32_t d,
                                 const model::CacheConfig& config) const {
  MC_ASSERT(c >= 0);
  MC_ASSERT(n >= 1);
  if (config.num_spec_tokens == 0 || d == 0) return std::nullopt;
  MC_ASSERT(n == 1 + d);
  return AllModeRecord{
      .block = static_cast<std::int32_t>((std::int64_t{c} + n - 1) / config.mamba_block_size),
      .drafts = d};
}

bool RunnerDecisions::decode_row(std::int32_t n, std::int32_t d, bool /*prompt_token*/,
                                 std::int32_t threshold) const {
  return n <= threshold && n - d == 1;
}

std::int32_t RunnerDecisions::decode_window_start(std::int32_t seq_len,
                                                  std::int32_t block_size) const {
  return std::max(seq_len - 1, 0) / block_size;
}

std::int32_t RunnerDecisions::first_scheduled_block(std::int32_t c, std::int32_t block_size) const {
  return static_cast<std::int32_t>(model::cdiv(std::int64_t{c} + 1, block_size) - 1);
}

} // namespace mc::gpu::engine
