#include "oracle/engine/forward.h"

#include "model/block_table.h"
#include "model/errors.h"
#include "oracle/engine/state_io.h"

#include <fmt/format.h>

namespace mc::oracle::engine {
namespace {

struct TensorStep {
  const ForwardContext& ctx;
  const ForwardRow& row;
  const RequestTruth& truth;
  std::int32_t batch_row = 0;
  std::int32_t tensor = 0;
  const model::StateTensor& t;

  const std::string& req_id() const { return row.scheduled->req_id; }
  std::int64_t history() const { return ctx.conv_history[static_cast<std::size_t>(tensor)]; }

  Finding finding(FindingKind kind, std::int32_t col, std::int32_t block, std::string detail,
                  std::string expected) const {
    return make_finding(*ctx.layout, kind, ctx.step, req_id(), tensor, col, block,
                        std::move(detail), std::move(expected));
  }

  // The block at `col` of the request's row, or nothing when it is no block to touch
  // (bad_block() then says why).
  std::optional<std::int32_t> block_at(std::int32_t col) const {
    const std::vector<std::int32_t>& ids = (*row.row)[static_cast<std::size_t>(t.group)];
    if (col < 0 || col >= static_cast<std::int32_t>(ids.size())) return std::nullopt;
    const std::int32_t block = ids[static_cast<std::size_t>(col)];
    if (block <= model::kNullBlockId || block >= ctx.layout->spec.num_blocks) return std::nullopt;
    return block;
  }

  Finding bad_block(std::int32_t col, std::string_view role) const {
    const std::vector<std::int32_t>& ids = (*row.row)[static_cast<std::size_t>(t.group)];
    if (col < 0 || col >= static_cast<std::int32_t>(ids.size()))
      return finding(FindingKind::bad_index, col, -1,
                     fmt::format("forward {} column outside the block-table row of {} columns",
                                 role, ids.size()),
                     "a column inside the row");
    const std::int32_t block = ids[static_cast<std::size_t>(col)];
    return finding(FindingKind::bad_index, col, block,
                   fmt::format("forward {} column holds {}", role,
                               block == model::kNullBlockId ? "the null block"
                               : block == model::kPadSlot   ? "a pad slot"
                                                            : "no valid block id"),
                   "a block of the request");
  }

  void log_write(std::int32_t col, std::int32_t block) const {
    ctx.log->writes.push_back({.batch_row = batch_row,
                               .tensor = tensor,
                               .group = t.group,
                               .col = col,
                               .block_id = block,
                               .origin = "forward"});
  }

  // The committed tokens (what the state read as initial is built from), and those plus the
  // tokens this step processes (what its writes are built from).
  TokenWindow committed() const {
    return {.head = std::span(truth.tokens).first(static_cast<std::size_t>(row.num_computed))};
  }
  TokenWindow processed() const {
    return {.head = committed().head, .tail = row.scheduled->token_ids};
  }
};

std::optional<Finding> check_read(const TensorStep& ts, std::int32_t col, std::int32_t offset) {
  const std::optional<std::int32_t> block = ts.block_at(col);
  if (!block) return ts.bad_block(col, "read");
  const std::int32_t c = ts.row.num_computed;
  StateStore& states = *ts.ctx.states;
  const std::optional<std::string> wrong =
      ts.t.kind() == model::StateKind::temporal
          ? states.check_temporal(ts.tensor, *block, ts.truth.hashes[static_cast<std::size_t>(c)],
                                  ts.truth.hashes)
          : states.check_conv(ts.tensor, *block, ts.history(), c, offset, ts.committed());
  *ts.ctx.bytes_checked += ts.t.natural_bytes;
  if (!wrong) return std::nullopt;
  return ts.finding(FindingKind::wrong_read, col, *block,
                    fmt::format("the forward reads its initial state with a = {}: {}",
                                ts.row.num_accepted, *wrong),
                    fmt::format("the state after {} tokens", c));
}

std::optional<Finding> write_state(const TensorStep& ts, std::int32_t col, model::TokenHash hash,
                                   std::int64_t running) {
  const std::optional<std::int32_t> block = ts.block_at(col);
  if (!block) return ts.bad_block(col, "write");
  if (ts.t.kind() == model::StateKind::temporal) {
    ts.ctx.states->write_temporal(ts.tensor, *block, hash);
  } else {
    ts.ctx.states->write_conv(ts.tensor, *block, ts.history(), running, ts.processed());
  }
  ts.log_write(col, *block);
  return std::nullopt;
}

std::optional<Finding> forward_align(const TensorStep& ts) {
  const model::ScheduledRequest& s = *ts.row.scheduled;
  const std::int32_t c = ts.row.num_computed;
  const std::int32_t bias = std::max(ts.row.num_accepted - 1, 0);
  const bool temporal = ts.t.kind() == model::StateKind::temporal;
  const std::int32_t w0 = ts.row.state_idx;
  if (c > 0)
    if (auto f = check_read(ts, temporal ? w0 + bias : w0, temporal ? 0 : bias)) return f;
  const std::int32_t running = c + s.num_scheduled_tokens - s.num_draft_tokens;
  const bool decode = s.num_scheduled_tokens - s.num_draft_tokens == 1;
  model::TokenHash h = ts.truth.hashes[static_cast<std::size_t>(c)];
  if (!temporal) return write_state(ts, w0, h, running);
  for (std::int32_t i = 0; i < s.num_scheduled_tokens; ++i) {
    h = model::extend_hash(h, s.token_ids[static_cast<std::size_t>(i)]);
    if (decode)
      if (auto f = write_state(ts, w0 + i, h, running)) return f;
  }
  if (!decode) return write_state(ts, w0, h, running);
  return std::nullopt;
}

// All mode (model/FORWARD.md): the initial state at the column the runner derived, offset 0;
// every block-aligned state strictly inside the step into its own block, the state after all
// scheduled tokens into the block of the last one, and, for a decode with drafts, the state
// after its first k tokens (k = 1 .. drafts) into the k-th column after that block.
std::optional<Finding> forward_all(const TensorStep& ts, std::int32_t block_size) {
  const model::ScheduledRequest& s = *ts.row.scheduled;
  const std::int32_t c = ts.row.num_computed;
  const std::int32_t end = c + s.num_scheduled_tokens;
  const std::int32_t last = ts.row.last_scheduled_col;
  if (c > 0)
    if (auto f = check_read(ts, ts.row.state_idx, 0)) return f;
  model::TokenHash h = ts.truth.hashes[static_cast<std::size_t>(c)];
  for (std::int32_t i = 0; i < s.num_scheduled_tokens; ++i) {
    h = model::extend_hash(h, s.token_ids[static_cast<std::size_t>(i)]);
    const std::int32_t n = c + i + 1;
    if (n == end) break;
    if (n % block_size == 0) {
      const std::int32_t col = n / block_size - 1; // a block-aligned intermediate state
      MC_ASSERT(col >= ts.row.first_scheduled_col && col < last);
      if (auto f = write_state(ts, col, h, n)) return f;
    }
    if (s.num_draft_tokens > 0) // the draft prefix of i + 1 tokens
      if (auto f = write_state(ts, last + i + 1, h, n)) return f;
  }
  return write_state(ts, last, h, end);
}

} // namespace

std::optional<Finding> run_forward(const ForwardContext& ctx, std::span<const ForwardRow> rows) {
  const model::Layout& layout = *ctx.layout;
  // At most one write per tensor and window column per row (decode: the whole window).
  ctx.log->writes.reserve(ctx.log->writes.size() +
                          rows.size() * layout.tensors.size() *
                              static_cast<std::size_t>(1 + layout.config.num_spec_blocks));
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const ForwardRow& row = rows[b];
    MC_ASSERT(row.scheduled != nullptr && row.row != nullptr && row.truth != nullptr);
    const RequestTruth& truth = *row.truth;
    MC_ASSERT(static_cast<std::int32_t>(truth.tokens.size()) >= row.num_computed);
    for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
      const TensorStep ts{.ctx = ctx,
                          .row = row,
                          .truth = truth,
                          .batch_row = static_cast<std::int32_t>(b),
                          .tensor = static_cast<std::int32_t>(i),
                          .t = layout.tensors[i]};
      std::optional<Finding> f = layout.config.mode == model::CacheMode::all
                                     ? forward_all(ts, layout.config.mamba_block_size)
                                     : forward_align(ts);
      if (f) return f;
    }
  }
  return std::nullopt;
}

} // namespace mc::oracle::engine
