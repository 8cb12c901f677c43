// The GPU side's forward metadata builder (model/forward_metadata.h), built every step as
// vLLM's mamba attention metadata builder builds it (mamba_attn.py: _compute_common_metadata,
// mamba_get_block_table_tensor, _compute_prefix_caching_block_indices and
// _update_metadata_for_cudagraph_capture): decodes first, the spec-decode threshold, the
// 1 + num_spec window of a decode row, the block indices of all mode, and a decode-only step
// padded to a CUDA-graph batch size through persistent buffers updated in place, the padding
// rows carrying the null block. The forward reads and writes through it (runner_forward.cpp).
#pragma once

#include "gpu/engine/runner_decisions.h"
#include "model/config.h"
#include "model/forward_metadata.h"

#include <cstdint>
#include <span>
#include <vector>

namespace mc::gpu::engine {

// One scheduled request as the builder sees it.
struct MetadataInput {
  std::int32_t num_computed = 0;  // c
  std::int32_t num_scheduled = 0; // s, drafts included
  std::int32_t num_draft = 0;     // d
  std::int32_t num_accepted = 1;  // a, as the forward starts
  std::int32_t all_record = -1;   // all mode: the block its record names (-1: none)
  bool prompt_token = false;      // its first token is a prompt token (c < the prompt's length)
  const model::GroupBlockIds* row = nullptr;
};

class MetadataBuilder {
public:
  MetadataBuilder(const model::CacheConfig& config, std::int32_t num_groups,
                  const RunnerDecisions& decisions);

  // `inputs[b]` is batch row b.
  model::ForwardMetadata build(std::span<const MetadataInput> inputs);

private:
  model::ForwardMetadataRow row_of(std::int32_t b, const MetadataInput& in, bool decode) const;
  void pad_for_graph(model::ForwardMetadata& md);
  // A batch of prefills dispatched as the spec-verify graph by its shape: every row, and the
  // padding past them, as the persistent buffers hold them from the last graph step.
  void replay_stale_graph(model::ForwardMetadata& md) const;

  model::CacheConfig config_;
  std::int32_t num_groups_ = 0;
  const RunnerDecisions* decisions_ = nullptr;
  // The CUDA-graph persistent buffers, one entry per capture row: per group the row's block
  // ids, and num_accepted. Updated in place every graph step, never reallocated.
  std::vector<std::vector<std::vector<std::int32_t>>> graph_ids_;
  std::vector<std::int32_t> graph_accepted_;
};

} // namespace mc::gpu::engine
