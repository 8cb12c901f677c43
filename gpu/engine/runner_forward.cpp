// The synthetic forward of one step as ForwardOps (model/FORWARD.md): per batch row, which
// columns get which temporal state (by running hash) and which conv window (by its end
// position), plus the tokens the conv stamps need; the executor runs the programs.
#include "gpu/engine/engine_runner.h"
#include "gpu/engine/runner_batch.h"

#include "model/errors.h"
#include "model/stamps.h"

#include <algorithm>

namespace mc::gpu::engine {

// The op fields shared by every write of row b (conv token window and counts).
ForwardOp EngineRunner::row_op(const Batch& batch, std::size_t b, std::int64_t token_offset,
                               std::int64_t token_pos0) const {
  const model::ScheduledRequest& s = batch.step->scheduled[b];
  const std::int32_t c = batch.num_computed[b];
  return ForwardOp{.batch_row = static_cast<std::int32_t>(b),
                   .num_computed = c,
                   .end = std::int64_t{c} + s.num_scheduled_tokens,
                   .token_pos0 = token_pos0,
                   .token_offset = token_offset};
}

void EngineRunner::add_row_ops(const Batch& batch, std::size_t b, std::int32_t state_idx,
                               std::vector<ForwardOp>& ops, std::vector<ForwardRead>& reads,
                               std::vector<std::int32_t>& tokens) const {
  const model::ScheduledRequest& s = batch.step->scheduled[b];
  const std::int32_t c = batch.num_computed[b];
  const std::vector<std::int32_t>& truth = truth_.at(s.req_id);
  MC_ASSERT(static_cast<std::int32_t>(truth.size()) >= c);
  const std::int32_t pos0 = std::max(0, c - conv_width_max_);
  const auto offset = static_cast<std::int64_t>(tokens.size());
  tokens.insert(tokens.end(), truth.begin() + pos0, truth.begin() + c);
  tokens.insert(tokens.end(), s.token_ids.begin(), s.token_ids.end());
  // hash[k] = h(c + k): the running hash after truth[0..c) and x[0..k).
  std::vector<model::TokenHash> hash{
      model::sequence_hash({truth.data(), static_cast<std::size_t>(c)})};
  for (const std::int32_t x : s.token_ids)
    hash.push_back(model::extend_hash(hash.back(), x));
  ForwardOp base = row_op(batch, b, offset, pos0);
  auto temporal = [&](std::int32_t col, std::int64_t k) {
    ForwardOp op = base;
    op.col = col;
    op.is_temporal = 1;
    op.hash = hash[static_cast<std::size_t>(k)];
    ops.push_back(op);
  };
  auto conv = [&](std::int32_t col, std::int64_t running) {
    ForwardOp op = base;
    op.col = col;
    op.running = running;
    ops.push_back(op);
  };
  const std::int32_t n = s.num_scheduled_tokens;
  const std::int32_t d = s.num_draft_tokens;
  if (layout_.config.mode == model::CacheMode::all) {
    const std::int32_t B = layout_.config.mamba_block_size;
    // All mode reads where it writes nothing else: every write of the row carries its read.
    if (c > 0) {
      base.read = static_cast<std::int32_t>(reads.size());
      reads.push_back({.batch_row = static_cast<std::int32_t>(b),
                       .col = state_idx,
                       .num_computed = c,
                       .token_pos0 = pos0,
                       .token_offset = offset,
                       .hash = hash[0]});
    }
    // The chunk's block-aligned intermediate states, a decode's draft prefixes in the columns
    // after its last block, then its final state (model/FORWARD.md).
    for (const AllModeBoundary& m : decisions_->all_mode_boundaries(c, n, B)) {
      temporal(m.col, m.pos - c);
      conv(m.col, m.pos);
    }
    const auto last = static_cast<std::int32_t>(model::cdiv(c + n, B) - 1);
    if (d > 0) {
      for (std::int32_t k = 1; k < n; ++k) {
        temporal(last + k, k);
        conv(last + k, std::int64_t{c} + k);
      }
    }
    temporal(last, n);
    conv(last, c + n);
    return;
  }
  if (n - d == 1) {
    for (std::int32_t t = 0; t < n; ++t)
      temporal(state_idx + t, t + 1);
  } else {
    temporal(state_idx, n);
  }
  conv(state_idx, std::int64_t{c} + n - d);
}

void EngineRunner::run_forward(const Batch& batch, const std::vector<std::int32_t>& state_idx) {
  std::vector<ForwardOp> ops;
  std::vector<ForwardRead> reads;
  std::vector<std::int32_t> tokens;
  for (std::size_t b = 0; b < batch.slot.size(); ++b)
    add_row_ops(batch, b, state_idx.empty() ? 0 : state_idx[b], ops, reads, tokens);
  if (ops.empty()) return;
  if (tokens.empty()) tokens.push_back(0); // a valid pointer for the kernel
  executor_->forward(tables_for(batch, Tables::batch), ops, reads, tokens);
}

} // namespace mc::gpu::engine
