// derive_forward_metadata (forward_metadata.h), following mamba_attn.py step by step.
#include "oracle/engine/forward_metadata.h"

#include "model/block_table.h"

#include <algorithm>

namespace mc::oracle::engine {
namespace {

// A query is a decode when it is at most the threshold (1 + num_spec with speculative
// decoding) long and, since here a chunk is always a prefill (model/FORWARD.md), has one token
// besides its drafts.
bool is_decode(const model::CacheConfig& config, const model::ScheduledRequest& s) {
  const std::int32_t decode_threshold = 1 + config.num_spec_tokens;
  const std::int32_t query_len = s.num_scheduled_tokens;
  return query_len <= decode_threshold && query_len - s.num_draft_tokens == 1;
}

model::ForwardMetadataRow derive_row(const model::CacheConfig& config, const ForwardRow& fr,
                                     std::int32_t batch_row, bool decode) {
  const model::ScheduledRequest& s = *fr.scheduled;
  const std::int64_t computed = fr.num_computed;
  const std::int64_t seq_len = computed + s.num_scheduled_tokens;
  const std::int64_t B = config.mamba_block_size;
  model::ForwardMetadataRow out{.batch_row = batch_row, .decode = decode};
  if (config.mode == model::CacheMode::all) {
    // The whole block table, and _compute_prefix_caching_block_indices.
    out.window_start = 0;
    out.state_indices = *fr.row;
    out.block_idx_last_computed = std::max<std::int32_t>(
        static_cast<std::int32_t>(model::cdiv(computed, B)) - 1, 0);
    out.block_idx_first_scheduled = static_cast<std::int32_t>(model::cdiv(computed + 1, B)) - 1;
    out.block_idx_last_scheduled =
        std::max<std::int32_t>(static_cast<std::int32_t>(model::cdiv(seq_len, B)) - 1, 0);
    out.block_idx_prev_step = fr.anchor; // the runner's, from its record (runner_bookkeeping.h)
  } else {
    // mamba_get_block_table_tensor gathers 1 + num_spec columns from (seq_len - 1) // B,
    // clamped at 0; a decode keeps all of them, a prefill the first.
    out.window_start = static_cast<std::int32_t>(std::max<std::int64_t>(seq_len - 1, 0) / B);
    const std::size_t keep = decode ? 1 + static_cast<std::size_t>(config.num_spec_tokens) : 1;
    out.state_indices.resize(fr.row->size());
    for (std::size_t g = 0; g < fr.row->size(); ++g) {
      const std::vector<std::int32_t>& table_row = (*fr.row)[g];
      for (std::size_t k = 0; k < keep; ++k) {
        const std::size_t col = static_cast<std::size_t>(out.window_start) + k;
        out.state_indices[g].push_back(col < table_row.size() ? table_row[col] : model::kPadSlot);
      }
    }
  }
  if (decode && config.num_spec_tokens > 0) out.num_accepted = fr.num_accepted;
  return out;
}

} // namespace

model::ForwardMetadata derive_forward_metadata(const model::CacheConfig& config,
                                               std::span<const ForwardRow> rows) {
  model::ForwardMetadata md;
  std::vector<std::int32_t> decode_rows, prefill_rows;
  for (std::size_t b = 0; b < rows.size(); ++b)
    (is_decode(config, *rows[b].scheduled) ? decode_rows : prefill_rows)
        .push_back(static_cast<std::int32_t>(b));
  md.num_decodes = static_cast<std::int32_t>(decode_rows.size());
  md.num_prefills = static_cast<std::int32_t>(prefill_rows.size());
  for (const std::int32_t b : decode_rows)
    md.rows.push_back(derive_row(config, rows[static_cast<std::size_t>(b)], b, true));
  for (const std::int32_t b : prefill_rows)
    md.rows.push_back(derive_row(config, rows[static_cast<std::size_t>(b)], b, false));
  // A decode-only batch runs as the CUDA graph of the next capture size; its extra rows index
  // the null block, which the kernels skip, with num_accepted 1 and block indices 0.
  if (md.num_prefills > 0 || md.num_decodes == 0) return md;
  const std::optional<std::int32_t> graph = model::cuda_graph_batch_size(md.num_decodes);
  if (!graph) return md;
  md.num_padded = *graph - md.num_decodes;
  const bool all = config.mode == model::CacheMode::all;
  const std::size_t groups = rows.front().row->size();
  for (std::int32_t k = 0; k < md.num_padded; ++k) {
    model::ForwardMetadataRow pad;
    pad.decode = true;
    pad.state_indices.assign(
        groups, std::vector<std::int32_t>(all ? 1 : 1 + static_cast<std::size_t>(config.num_spec_tokens),
                                          model::kNullBlockId));
    if (config.num_spec_tokens > 0) pad.num_accepted = 1;
    if (all) {
      pad.block_idx_last_computed = 0;
      pad.block_idx_first_scheduled = 0;
      pad.block_idx_last_scheduled = 0;
      // graph capture zero-fills the anchor's tail (mamba_attn.py)
      if (config.num_spec_tokens > 0) pad.block_idx_prev_step = 0;
    }
    md.rows.push_back(std::move(pad));
  }
  return md;
}

} // namespace mc::oracle::engine
