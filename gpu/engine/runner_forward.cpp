// The synthetic forward of one step as ForwardOps and ForwardReads (model/FORWARD.md), through
// the step's metadata (forward_metadata.h): per metadata row, the initial state it reads at the
// column the metadata names, which columns get which temporal state (by running hash) and which
// conv window (by its end position), plus the tokens the conv stamps need; the executor runs
// the programs, and a read that differed from the state the row starts from is a finding.
#include "gpu/engine/engine_runner.h"
#include "gpu/engine/runner_batch.h"

#include "model/arena.h"
#include "model/conv_history.h"
#include "model/errors.h"
#include "model/stamps.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::gpu::engine {

struct EngineRunner::RowForward {
  const Batch* batch = nullptr;
  const model::ForwardMetadata* md = nullptr;
  std::size_t md_row = 0;        // into md->rows
  std::int32_t num_accepted = 1; // the runner's a (all mode's read column)
  AllModeRecord all_record;      // all mode: what the row's last decode with drafts recorded
  std::int64_t step = 0;
};

std::optional<ForwardReadFinding> EngineRunner::add_row_ops(const RowForward& f,
                                                            RowOps& out) const {
  const model::ForwardMetadataRow& m = f.md->rows[f.md_row];
  const auto b = static_cast<std::size_t>(m.batch_row);
  const Batch& batch = *f.batch;
  const model::ScheduledRequest& s = batch.step->scheduled[b];
  const std::int32_t c = batch.num_computed[b];
  const std::vector<std::int32_t>& truth = truth_.at(s.req_id);
  MC_ASSERT(static_cast<std::int32_t>(truth.size()) >= c);
  const std::int32_t pos0 = std::max(0, c - conv_width_max_);
  const auto offset = static_cast<std::int64_t>(out.tokens.size());
  out.tokens.insert(out.tokens.end(), truth.begin() + pos0, truth.begin() + c);
  out.tokens.insert(out.tokens.end(), s.token_ids.begin(), s.token_ids.end());
  // hash[k] = h(c + k): the running hash after truth[0..c) and x[0..k).
  std::vector<model::TokenHash> hash{
      model::sequence_hash({truth.data(), static_cast<std::size_t>(c)})};
  for (const std::int32_t x : s.token_ids)
    hash.push_back(model::extend_hash(hash.back(), x));
  ForwardOp base{.batch_row = m.batch_row,
                 .num_computed = c,
                 .end = std::int64_t{c} + s.num_scheduled_tokens,
                 .token_pos0 = pos0,
                 .token_offset = offset};
  auto temporal = [&](std::int32_t col, std::int64_t k) {
    ForwardOp op = base;
    op.col = col;
    op.is_temporal = 1;
    op.hash = hash[static_cast<std::size_t>(k)];
    out.ops.push_back(op);
  };
  auto conv = [&](std::int32_t col, std::int64_t running) {
    ForwardOp op = base;
    op.col = col;
    op.running = running;
    out.ops.push_back(op);
  };
  // All mode writes both states after the first k scheduled tokens into one column.
  auto states_after = [&](std::int32_t col, std::int64_t k) {
    temporal(col, k);
    conv(col, c + k);
  };
  auto read = [&](std::int32_t batch_row, std::int32_t col, std::int32_t conv_col,
                  std::int32_t conv_offset) {
    base.read = static_cast<std::int32_t>(out.reads.size());
    out.reads.push_back({.batch_row = batch_row,
                         .col = col,
                         .conv_col = conv_col,
                         .conv_offset = conv_offset,
                         .num_computed = c,
                         .token_pos0 = pos0,
                         .token_offset = offset,
                         .hash = hash[0]});
  };
  const std::int32_t n = s.num_scheduled_tokens;
  const std::int32_t d = s.num_draft_tokens;
  if (layout_.config.mode == model::CacheMode::all) {
    const std::int32_t B = layout_.config.mamba_block_size;
    const std::int32_t ns = layout_.config.num_spec_tokens;
    // At a record the decode left the state after all its tokens in the recorded block (the
    // metadata's anchor) and the state after its first a tokens a columns past it; without
    // one the state sits at the anchor's fallback, the block of the last computed token
    // (model/FORWARD.md).
    const std::int32_t a = f.num_accepted;
    const std::int32_t anchor = ns > 0 ? m.block_idx_prev_step : m.block_idx_last_computed;
    const std::int32_t r =
        f.all_record.block >= 0 && a != 1 + f.all_record.drafts ? anchor + a : anchor;
    if (c > 0) read(m.batch_row, r, r, 0);
    // The chunk's block-aligned intermediate states from the block of its first scheduled
    // token on, a decode's draft prefixes in the columns after its last block, then its final
    // state in the block of its last scheduled token.
    const std::int32_t shift = m.block_idx_first_scheduled - c / B;
    for (const AllModeBoundary& bd : decisions_->all_mode_boundaries(c, n, B))
      states_after(bd.col + shift, bd.pos - c);
    const std::int32_t last = m.block_idx_last_scheduled;
    if (d > 0)
      for (std::int32_t k = 1; k < n; ++k)
        states_after(last + k, k);
    states_after(last, n);
    return std::nullopt;
  }
  const std::int32_t w = m.window_start;
  if (c > 0) {
    // A decode reads its temporal state at entry a - 1 of its window and its conv window at
    // offset a - 1 of entry 0, a from the metadata's num_accepted; where the metadata carries
    // none (no spec decode) the kernel has no count and reads entry 0, as a prefill reads the
    // one entry of its window, both at offset 0.
    const std::int32_t a = m.num_accepted;
    const bool counted = m.decode && a > 0;
    const bool bounded = decisions_->bounds_accepted_read();
    const std::int32_t j = counted || !bounded ? decisions_->accepted_read_index(a) : 0;
    const std::int32_t conv_offset = counted ? a - 1 : 0;
    const auto width = static_cast<std::int32_t>(m.state_indices.front().size());
    if (j >= 0 && j < width) {
      read(m.batch_row, w + j, w, conv_offset);
    } else if (bounded) {
      return ForwardReadFinding{
          .batch_row = m.batch_row,
          .col = w + j,
          .text = fmt::format("step {}: the forward of batch row {} ({}) would read its "
                              "temporal state at entry {} of a window of {} entries "
                              "(num_accepted {}): out of the window",
                              f.step, m.batch_row, s.req_id, j, width, a)};
    } else {
      // Unbounded: entry j of the row is entry row * width + j of the step's flat
      // state_indices_tensor_d, another row's entry or one outside the tensor. The access is
      // reported, never made.
      const std::int64_t flat = static_cast<std::int64_t>(f.md_row) * width + j;
      const std::int64_t entries = std::int64_t{f.md->num_decodes + f.md->num_padded} * width;
      const bool outside = flat < 0 || flat >= entries;
      const std::int64_t other = outside ? -1 : flat / width;
      const model::ForwardMetadataRow* o =
          outside ? nullptr : &f.md->rows[static_cast<std::size_t>(other)];
      return ForwardReadFinding{
          .batch_row = m.batch_row,
          .col = w + j,
          .text = fmt::format(
              "step {}: the forward of batch row {} ({}) reads state_indices_tensor_d[{}, {}] "
              "(num_accepted {}): flat entry {} of a tensor of {} rows of {} entries, {}",
              f.step, m.batch_row, s.req_id, f.md_row, j, a, flat,
              f.md->num_decodes + f.md->num_padded, width,
              outside            ? std::string("outside the tensor")
              : o->batch_row < 0 ? fmt::format("entry {} of padding row {}", flat % width, other)
                                 : fmt::format("entry {} of row {} (batch row {}): another "
                                               "request's block",
                                               flat % width, other, o->batch_row))};
    }
  }
  if (m.decode) {
    for (std::int32_t t = 0; t < n; ++t)
      temporal(w + t, t + 1);
  } else {
    temporal(w, n);
  }
  conv(w, std::int64_t{c} + n - d);
  return std::nullopt;
}

// What the block a wrong read found holds, as far as the row's own states tell: the temporal
// state after some prefix of its tokens, or none of them.
ForwardReadFinding EngineRunner::describe_wrong_read(const StepRecord& rec, const Batch& batch,
                                                     const ForwardRead& read,
                                                     std::int32_t tensor) const {
  const model::StateTensor& t = layout_.tensors[static_cast<std::size_t>(tensor)];
  const bool temporal = t.kind() == model::StateKind::temporal;
  const auto b = static_cast<std::size_t>(read.batch_row);
  const model::ScheduledRequest& s = batch.step->scheduled[b];
  const std::int32_t col = temporal ? read.col : read.conv_col;
  const auto& ids =
      slots_[static_cast<std::size_t>(batch.slot[b])].row[static_cast<std::size_t>(t.group)];
  const std::int32_t block = col >= 0 && col < static_cast<std::int32_t>(ids.size())
                                 ? ids[static_cast<std::size_t>(col)]
                                 : -1;
  std::string held = "no block (outside the row or not a block id)";
  if (block >= 0 && block < layout_.spec.num_blocks) {
    held = temporal ? "bytes of no state of this request" : "a conv window that is not that state";
    if (temporal) {
      const model::ArenaRange range{.arena = t.arena,
                                    .offset_bytes = t.offset_bytes + block * t.block_stride_bytes,
                                    .size_bytes = t.natural_bytes};
      const std::span<const std::byte> bytes = executor_->read(std::span(&range, 1)).front();
      std::vector<std::byte> expect(static_cast<std::size_t>(t.natural_bytes));
      model::fill_poison(expect, range.offset_bytes);
      if (std::ranges::equal(bytes, expect)) held = "the arena's poison (never written)";
      const std::vector<std::int32_t>& truth = truth_.at(s.req_id);
      model::TokenHash h = model::kEmptySequenceHash;
      const auto c = static_cast<std::size_t>(read.num_computed);
      // Prefixes of the committed tokens, then of the committed ones and this step's.
      for (std::size_t k = 0; k <= c + s.token_ids.size(); ++k) {
        if (k > 0) h = model::extend_hash(h, k <= c ? truth[k - 1] : s.token_ids[k - 1 - c]);
        model::fill_temporal(expect, h, tensor);
        if (std::equal(expect.begin(), expect.end(), bytes.begin())) {
          held = k <= c ? fmt::format("the state after {} tokens", k)
                        : fmt::format("the state after {} tokens and {} of this step's", c, k - c);
          break;
        }
      }
    }
  }
  return ForwardReadFinding{
      .batch_row = read.batch_row,
      .tensor = tensor,
      .col = col,
      .block = block,
      .text = fmt::format(
          "step {}: the forward of batch row {} ({}) reads its initial {} state "
          "of tensor {} at column {} (block {}{}): it holds {}, expected the "
          "state after {} tokens",
          rec.step, read.batch_row, s.req_id, temporal ? "temporal" : "conv", tensor, col, block,
          temporal ? "" : fmt::format(", offset {}", read.conv_offset), held, read.num_computed)};
}

void EngineRunner::run_forward(StepRecord& rec, const Batch& batch,
                               const std::vector<std::int32_t>& num_accepted,
                               const std::vector<AllModeRecord>& all_record) {
  std::vector<MetadataInput> inputs;
  inputs.reserve(batch.slot.size());
  for (std::size_t b = 0; b < batch.slot.size(); ++b) {
    const model::ScheduledRequest& s = batch.step->scheduled[b];
    inputs.push_back({.num_computed = batch.num_computed[b],
                      .num_scheduled = s.num_scheduled_tokens,
                      .num_draft = s.num_draft_tokens,
                      .num_accepted = num_accepted[b],
                      .all_record = all_record.empty() ? -1 : all_record[b].block,
                      .prompt_token = batch.num_computed[b] < prompt_len_.at(s.req_id),
                      .row = &slots_[static_cast<std::size_t>(batch.slot[b])].row});
  }
  rec.metadata = metadata_builder_.build(inputs);
  const model::ForwardMetadata& md = rec.metadata;
  const bool graph = md.num_prefills == 0 && md.num_decodes > 0 &&
                     model::cuda_graph_batch_size(md.num_decodes).has_value();
  // Per metadata row: its read and writes in block-table columns, its tokens from 0. Padding
  // rows carry the null block, which the kernels skip (seed 004's null_block_id).
  std::vector<RowOps> rows(md.rows.size());
  for (std::size_t i = 0; i < md.rows.size(); ++i) {
    const model::ForwardMetadataRow& m = md.rows[i];
    if (m.batch_row < 0) continue;
    const auto b = static_cast<std::size_t>(m.batch_row);
    const RowForward f{.batch = &batch,
                       .md = &md,
                       .md_row = i,
                       .num_accepted = num_accepted[b],
                       .all_record = all_record.empty() ? AllModeRecord{} : all_record[b],
                       .step = batch.step->index};
    if (std::optional<ForwardReadFinding> bad = add_row_ops(f, rows[i])) {
      rec.forward_read = std::move(bad);
      return;
    }
  }
  std::vector<ForwardRead> reads; // as add_row_ops made them, per slot of the differences
  std::vector<std::uint64_t> diffs;
  if (graph) {
    GraphInputs in = graph_inputs(md, rows);
    diffs = executor_->replay_graph(in, !decisions_->updates_graph_buffers_in_place());
    for (const RowOps& r : rows)
      reads.push_back(r.reads.empty() ? ForwardRead{.batch_row = -1} : r.reads.front());
  } else {
    std::vector<ForwardOp> ops;
    std::vector<std::int32_t> tokens;
    for (const RowOps& r : rows) {
      const auto token_base = static_cast<std::int64_t>(tokens.size());
      const auto read_base = static_cast<std::int32_t>(reads.size());
      for (ForwardOp op : r.ops) {
        op.token_offset += token_base;
        if (op.read >= 0) op.read += read_base;
        ops.push_back(op);
      }
      for (ForwardRead rd : r.reads) {
        rd.token_offset += token_base;
        reads.push_back(rd);
      }
      tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
    }
    if (ops.empty()) return;
    if (tokens.empty()) tokens.push_back(0); // a valid pointer for the kernel
    diffs = executor_->forward(tables_for(batch, Tables::batch), ops, reads, tokens);
  }
  const std::size_t num_tensors = layout_.tensors.size();
  for (std::size_t i = 0; i < diffs.size(); ++i)
    if (diffs[i] != 0) {
      rec.forward_read = describe_wrong_read(rec, batch, reads[i / num_tensors],
                                             static_cast<std::int32_t>(i % num_tensors));
      return;
    }
  check_forward_kernels_of(rec, batch);
}

namespace {

// The step's prefill rows for selective_scan_fn over a temporal state, and "scan" among the
// kernels where any goes: each row's block (all mode: its table row, padded with -1, and its
// block indices) and whether it starts from a state. None goes where the worker's tracer values
// would not stay exact (a pool of many blocks with long chunks). In all mode a row whose chunk
// does not start on a block boundary is left out: the kernel finds the boundaries from the
// chunk's start, and vLLM's chunking never starts one elsewhere.
void add_scan_rows(ForwardKernelStep& step, const model::ForwardMetadata& md,
                   const model::Step& scheduled, const std::vector<std::int32_t>& num_computed) {
  std::vector<const model::ForwardMetadataRow*> prefills;
  std::int32_t width = 1;
  std::int64_t longest = 0;
  for (const model::ForwardMetadataRow& m : md.rows) {
    const auto b = static_cast<std::size_t>(m.batch_row);
    if (m.decode || (step.all_mode && num_computed[b] % step.block_size != 0)) continue;
    prefills.push_back(&m);
    width = std::max(width, static_cast<std::int32_t>(m.state_indices.front().size()));
    longest = std::max<std::int64_t>(longest, scheduled.scheduled[b].num_scheduled_tokens);
  }
  if (prefills.empty() || !scan_tracer_fits(step.num_blocks, longest)) return;
  step.kernels.push_back("scan");
  step.prefill_width = step.all_mode ? width : 1;
  for (const model::ForwardMetadataRow* m : prefills) {
    const auto b = static_cast<std::size_t>(m->batch_row);
    const std::vector<std::int32_t>& ids = m->state_indices.front();
    if (step.all_mode) {
      step.prefill_indices.insert(step.prefill_indices.end(), ids.begin(), ids.end());
      step.prefill_indices.resize(step.prefill_indices.size() + width - ids.size(), -1);
      step.prefill_first.push_back(m->block_idx_first_scheduled);
      step.prefill_last.push_back(m->block_idx_last_scheduled);
      step.prefill_last_computed.push_back(m->block_idx_last_computed);
      step.prefill_computed.push_back(num_computed[b]);
    } else {
      step.prefill_indices.push_back(ids.front());
    }
    step.prefill_initial.push_back(num_computed[b] > 0 ? 1 : 0);
    step.prefill_query_start_loc.push_back(step.prefill_query_start_loc.back() +
                                           scheduled.scheduled[b].num_scheduled_tokens);
  }
}

} // namespace

// The module's own forward kernels, where the executor has them (an external worker): the
// step's rows as vLLM's mixer hands them over, what they wrote on the worker's tracer states
// judged against the metadata (forward_kernels.h). In all mode the decode kernels run only
// without drafts (model/FORWARD.md, "External forward kernels").
void EngineRunner::check_forward_kernels_of(StepRecord& rec, const Batch& batch) {
  const model::ForwardMetadata& md = rec.metadata;
  const bool all = layout_.config.mode == model::CacheMode::all;
  const bool spec = layout_.config.num_spec_tokens > 0;
  if (layout_.config.mode == model::CacheMode::none) return;
  const std::vector<std::string> available = executor_->forward_kernels();
  if (available.empty()) return;
  const auto contains = [](const std::vector<std::string>& kernels, std::string_view k) {
    return std::find(kernels.begin(), kernels.end(), k) != kernels.end();
  };
  ForwardKernelStep step{.num_blocks = layout_.spec.num_blocks,
                         .width = 1 + layout_.config.num_spec_tokens,
                         .all_mode = all,
                         .block_size = layout_.config.mamba_block_size};
  bool any_temporal = false; // selective_scan_fn's state, in any group
  for (std::size_t i = 0; i < layout_.tensors.size(); ++i) {
    const model::StateTensor& t = layout_.tensors[i];
    const bool temporal = t.kind() == model::StateKind::temporal;
    any_temporal = any_temporal || temporal;
    if (t.group != 0) continue;
    const std::string kernel = temporal ? "ssm" : "conv";
    if (md.num_decodes == 0 || (all && spec) || !contains(available, kernel) ||
        contains(step.kernels, kernel))
      continue;
    step.kernels.push_back(kernel);
    if (!temporal) {
      step.state_len = static_cast<std::int32_t>(t.shape.conv_state_len);
      step.conv_width = static_cast<std::int32_t>(
                            model::conv_history_rows(layout_, static_cast<std::int32_t>(i))) +
                        1;
    }
  }
  if (contains(available, "scan") && any_temporal && md.num_prefills > 0)
    add_scan_rows(step, md, *batch.step, batch.num_computed);
  if (step.kernels.empty()) return;
  // The decode rows come first in the metadata, the padding rows last; they go only to the
  // decode kernels (which run only on a step with decodes).
  const bool decode_kernels = std::any_of(step.kernels.begin(), step.kernels.end(),
                                          [](const std::string& k) { return k != "scan"; });
  std::vector<const model::ForwardMetadataRow*> rows;
  for (const model::ForwardMetadataRow& m : md.rows)
    if (m.decode && decode_kernels) {
      rows.push_back(&m);
      if (all)
        step.width =
            std::max(step.width, static_cast<std::int32_t>(m.state_indices.front().size()));
    }
  step.rows = static_cast<std::int32_t>(rows.size());
  if (spec) step.query_start_loc.push_back(0);
  for (const model::ForwardMetadataRow* m : rows) {
    const std::vector<std::int32_t>& ids = m->state_indices.front();
    MC_ASSERT(all ? static_cast<std::int32_t>(ids.size()) <= step.width
                  : static_cast<std::int32_t>(ids.size()) == step.width);
    step.state_indices.insert(step.state_indices.end(), ids.begin(), ids.end());
    step.state_indices.resize(step.state_indices.size() + step.width - ids.size(), -1);
    if (all) {
      step.last_computed.push_back(m->block_idx_last_computed);
      step.last_scheduled.push_back(m->block_idx_last_scheduled);
    }
    if (!spec) continue;
    step.num_accepted.push_back(m->num_accepted);
    // A padding row has the shape of a full decode, as the captured graph's batch has.
    const std::int32_t q =
        m->batch_row < 0
            ? step.width
            : batch.step->scheduled[static_cast<std::size_t>(m->batch_row)].num_scheduled_tokens;
    step.query_start_loc.push_back(step.query_start_loc.back() + q);
  }
  const auto describe_row = [&](std::int32_t r) {
    const model::ForwardMetadataRow& m = *rows[static_cast<std::size_t>(r)];
    if (m.batch_row < 0) return fmt::format("row {} (a CUDA-graph padding row)", r);
    return fmt::format("row {} (batch row {}, {})", r, m.batch_row,
                       batch.step->scheduled[static_cast<std::size_t>(m.batch_row)].req_id);
  };
  const auto judge = [&](const ForwardKernelStep& s, const std::string& context) {
    ForwardKernelReport report;
    try {
      report = executor_->run_forward_kernels(s);
    } catch (const KernelFailure& e) {
      if (context.empty()) throw;
      throw KernelFailure(e.kind, fmt::format("{}: {}", context, e.what()));
    }
    if (std::optional<std::string> bad = check_forward_kernels(s, report, describe_row))
      rec.forward_read = ForwardReadFinding{
          .kind = "forward-kernel",
          .text = fmt::format("step {}: the module's forward kernels{}: {}", rec.step,
                              context.empty() ? "" : ", " + context, *bad)};
    return !rec.forward_read;
  };
  if (!judge(step, "") || count_probed_) return;
  // Once a run, at its first step with a decode row and spec decode: selective_state_update
  // given that row's count out of range, past the window and 0, as a stale or racing count
  // reaches a kernel (#50021, #48475). Every valid trace keeps a count within its window, so
  // only such a probe tells a kernel that bounds the count from one that does not.
  if (!spec || md.num_decodes == 0 || !contains(step.kernels, "ssm")) return;
  count_probed_ = true;
  ForwardKernelStep probe = step;
  probe.kernels = {"ssm"};
  probe.prefill_indices.clear();
  probe.prefill_initial.clear();
  probe.prefill_query_start_loc.assign(1, 0);
  probe.probe_row = 0;
  for (const std::int32_t a : {step.width + 1, 0}) {
    probe.num_accepted[0] = a;
    if (!judge(probe, fmt::format("given row 0's num_accepted as {} (out of range for its "
                                  "window of {} entries, a probe of the kernel's bound)",
                                  a, step.width)))
      return;
  }
}

// The graph's fixed layout for the step (executor.h, GraphInputs): the shape captured for its
// batch size, grown where the step needs more (then captured anew, where vLLM sizes its
// buffers for the worst case up front); each row's ops with the metadata row as their batch
// row and the entries of its window as their columns; padding rows' writes of the state after
// no tokens, which land nowhere while they carry the null block.
GraphInputs EngineRunner::graph_inputs(const model::ForwardMetadata& md,
                                       std::vector<RowOps>& rows) {
  const auto batch_size = static_cast<std::int32_t>(md.rows.size());
  GraphShape& shape = graph_shapes_[batch_size];
  shape.batch_size = batch_size;
  for (std::size_t i = 0; i < md.rows.size(); ++i) {
    const model::ForwardMetadataRow& m = md.rows[i];
    RowOps& r = rows[i];
    if (m.batch_row < 0) {
      r.ops.push_back({.col = 0, .is_temporal = 1, .hash = model::kEmptySequenceHash});
      r.ops.push_back({.col = 0});
    }
    for (const std::vector<std::int32_t>& ids : m.state_indices)
      shape.width = std::max(shape.width, static_cast<std::int32_t>(ids.size()));
    shape.ops_per_row = std::max(shape.ops_per_row, static_cast<std::int32_t>(r.ops.size()));
    shape.tokens_per_row =
        std::max(shape.tokens_per_row, std::max(1, static_cast<std::int32_t>(r.tokens.size())));
    MC_ASSERT(r.reads.size() <= 1);
  }
  const auto n = static_cast<std::size_t>(batch_size);
  GraphInputs in{.shape = shape};
  for (std::int32_t g = 0; g < layout_.num_groups(); ++g) {
    std::vector<std::int32_t> ids(n * static_cast<std::size_t>(shape.width), model::kPadSlot);
    for (std::size_t i = 0; i < n; ++i) {
      const std::vector<std::int32_t>& row = md.rows[i].state_indices[static_cast<std::size_t>(g)];
      std::copy(row.begin(), row.end(), ids.begin() + static_cast<std::ptrdiff_t>(i) * shape.width);
    }
    in.state_indices.push_back(std::move(ids));
  }
  in.ops.assign(n * static_cast<std::size_t>(shape.ops_per_row), ForwardOp{.batch_row = -1});
  in.reads.assign(n, ForwardRead{.batch_row = -1});
  in.tokens.assign(n * static_cast<std::size_t>(shape.tokens_per_row), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t w = std::max(md.rows[i].window_start, 0);
    const auto row = static_cast<std::int32_t>(i);
    const std::int64_t token_base = std::int64_t{row} * shape.tokens_per_row;
    const RowOps& r = rows[i];
    for (std::size_t k = 0; k < r.ops.size(); ++k) {
      ForwardOp op = r.ops[k];
      op.batch_row = row;
      op.col -= w;
      op.token_offset += token_base;
      if (op.read >= 0) op.read = row;
      in.ops[i * static_cast<std::size_t>(shape.ops_per_row) + k] = op;
    }
    if (!r.reads.empty()) {
      ForwardRead rd = r.reads.front();
      rd.batch_row = row;
      rd.col -= w;
      rd.conv_col -= w;
      rd.token_offset += token_base;
      in.reads[i] = rd;
    }
    std::copy(r.tokens.begin(), r.tokens.end(), in.tokens.begin() + token_base);
  }
  return in;
}

} // namespace mc::gpu::engine
