// MetadataBuilder (forward_metadata.h).
#include "gpu/engine/forward_metadata.h"

#include "model/errors.h"

#include <algorithm>

namespace mc::gpu::engine {

MetadataBuilder::MetadataBuilder(const model::CacheConfig& config, std::int32_t num_groups,
                                 const RunnerDecisions& decisions)
    : config_(config), num_groups_(num_groups), decisions_(&decisions) {
  const auto capacity = static_cast<std::size_t>(model::cuda_graph_capture_sizes().back());
  const std::size_t width =
      config_.mode == model::CacheMode::all ? 1 : 1 + static_cast<std::size_t>(config_.num_spec_tokens);
  graph_ids_.assign(capacity, std::vector<std::vector<std::int32_t>>(
                                  static_cast<std::size_t>(num_groups_),
                                  std::vector<std::int32_t>(width, model::kNullBlockId)));
  graph_accepted_.assign(capacity, 1);
}

model::ForwardMetadataRow MetadataBuilder::row_of(std::int32_t b, const MetadataInput& in,
                                                  bool decode) const {
  const std::int32_t B = config_.mamba_block_size;
  const std::int32_t c = in.num_computed;
  const std::int32_t seq_len = c + in.num_scheduled;
  model::ForwardMetadataRow r{.batch_row = b, .decode = decode};
  MC_ASSERT(in.row != nullptr && static_cast<std::int32_t>(in.row->size()) == num_groups_);
  if (config_.mode == model::CacheMode::all) {
    r.window_start = 0;
    r.state_indices = *in.row;
    r.block_idx_last_computed = std::max(static_cast<std::int32_t>(model::cdiv(c, B)) - 1, 0);
    r.block_idx_first_scheduled = decisions_->first_scheduled_block(c, B);
    r.block_idx_last_scheduled =
        std::max(static_cast<std::int32_t>(model::cdiv(seq_len, B)) - 1, 0);
    // The builder's anchor: the record where the runner kept one, else (c - 1) // B, clamped.
    if (config_.num_spec_tokens > 0)
      r.block_idx_prev_step = in.all_record >= 0 ? in.all_record : std::max(c - 1, 0) / B;
  } else {
    r.window_start = decode ? decisions_->decode_window_start(seq_len, B)
                            : std::max(seq_len - 1, 0) / B;
    const std::int32_t width = decode ? 1 + config_.num_spec_tokens : 1;
    for (const std::vector<std::int32_t>& ids : *in.row) {
      std::vector<std::int32_t> window;
      for (std::int32_t j = 0; j < width; ++j) {
        const std::int32_t col = r.window_start + j;
        // A column past the row gathers the table's padding, as torch.gather over the padded
        // block table does.
        window.push_back(col < static_cast<std::int32_t>(ids.size())
                             ? ids[static_cast<std::size_t>(col)]
                             : model::kPadSlot);
      }
      r.state_indices.push_back(std::move(window));
    }
  }
  if (decode && config_.num_spec_tokens > 0 && decisions_->on_spec_path(in.num_draft))
    r.num_accepted = in.num_accepted;
  return r;
}

// _update_metadata_for_cudagraph_capture: a decode-only step runs as the captured graph of the
// next capture size, its rows copied into the persistent buffers and the rest of them padded.
void MetadataBuilder::pad_for_graph(model::ForwardMetadata& md) {
  if (md.num_prefills != 0 || md.num_decodes == 0) return;
  const std::optional<std::int32_t> padded = model::cuda_graph_batch_size(md.num_decodes);
  if (!padded) return;
  const bool all = config_.mode == model::CacheMode::all;
  for (std::int32_t i = 0; i < md.num_decodes; ++i) {
    const auto k = static_cast<std::size_t>(i);
    graph_ids_[k] = md.rows[k].state_indices;
    graph_accepted_[k] = md.rows[k].num_accepted;
  }
  const bool pad_null = decisions_->pads_graph_rows_with_null();
  for (std::int32_t i = md.num_decodes; i < *padded; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (pad_null)
      for (std::vector<std::int32_t>& ids : graph_ids_[k])
        ids.assign(all ? 1 : 1 + static_cast<std::size_t>(config_.num_spec_tokens),
                   model::kNullBlockId);
    graph_accepted_[k] = config_.num_spec_tokens > 0 ? 1 : 0;
    model::ForwardMetadataRow r{.batch_row = -1,
                                .decode = true,
                                .state_indices = graph_ids_[k],
                                .num_accepted = graph_accepted_[k]};
    if (all) {
      r.block_idx_last_computed = 0;
      r.block_idx_first_scheduled = 0;
      r.block_idx_last_scheduled = 0;
      if (config_.num_spec_tokens > 0) r.block_idx_prev_step = 0;
    }
    md.rows.push_back(std::move(r));
  }
  md.num_padded = *padded - md.num_decodes;
}

void MetadataBuilder::replay_stale_graph(model::ForwardMetadata& md) const {
  const auto n = static_cast<std::int32_t>(md.rows.size());
  const std::optional<std::int32_t> padded = model::cuda_graph_batch_size(n);
  if (!padded) return;
  md.rows.resize(static_cast<std::size_t>(*padded), model::ForwardMetadataRow{.batch_row = -1});
  for (std::size_t i = 0; i < md.rows.size(); ++i) {
    model::ForwardMetadataRow& r = md.rows[i];
    r.decode = true;
    r.state_indices = graph_ids_[i];
    r.num_accepted = graph_accepted_[i];
  }
  md.num_decodes = n;
  md.num_prefills = 0;
  md.num_padded = *padded - n;
}

model::ForwardMetadata MetadataBuilder::build(std::span<const MetadataInput> inputs) {
  // split_decodes_and_prefills over the reordered batch (RunnerDecisions::decode_row).
  const std::int32_t threshold = config_.num_spec_tokens > 0 ? 1 + config_.num_spec_tokens : 1;
  model::ForwardMetadata md;
  for (const bool decodes : {true, false}) {
    for (std::size_t b = 0; b < inputs.size(); ++b) {
      const MetadataInput& in = inputs[b];
      const bool decode =
          decisions_->decode_row(in.num_scheduled, in.num_draft, in.prompt_token, threshold);
      if (decode != decodes) continue;
      md.rows.push_back(row_of(static_cast<std::int32_t>(b), in, decode));
      ++(decode ? md.num_decodes : md.num_prefills);
    }
  }
  const bool uniform_spec_shape =
      config_.mode == model::CacheMode::align && threshold > 1 && !inputs.empty() &&
      std::ranges::all_of(inputs,
                          [&](const MetadataInput& in) { return in.num_scheduled == threshold; });
  if (uniform_spec_shape && md.num_prefills > 0 && decisions_->dispatches_graph_by_shape())
    replay_stale_graph(md);
  else
    pad_for_graph(md);
  return md;
}

} // namespace mc::gpu::engine
