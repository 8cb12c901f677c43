// The forward's metadata (model/FORWARD.md, "The forward's metadata"): what vLLM's mamba
// attention metadata builder (mamba_attn.py) hands the state kernels for one step, as shared
// vocabulary. Each side builds its own (gpu/engine/forward_metadata.*, oracle/engine/
// forward_metadata.*) and the lockstep harness compares them field by field; nothing here
// decides a value, except the CUDA-graph capture sizes, which are the reference's geometry.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mc::model {

// One row of the builder's batch: the decode rows first, then the prefill rows (the order the
// model runner's reorder gives the kernels), then the CUDA-graph padding rows.
struct ForwardMetadataRow {
  std::int32_t batch_row = -1; // the step's batch row; -1 on a padding row
  bool decode = false;         // in state_indices_tensor_d (padding rows too)
  // Align mode: the block-table column of the window's first block, (seq_len - 1) // B
  // clamped at 0 (mamba_get_block_table_tensor's start). All mode: 0 (the whole row). Padding: -1.
  std::int32_t window_start = -1;
  // Per group, the block ids the kernels index: a decode row's 1 + num_spec window (align) or
  // its whole block-table row (all); a prefill row's first window block (align,
  // state_indices_tensor_p) or whole row (all); a padding row's one null block per column.
  std::vector<std::vector<std::int32_t>> state_indices;
  // num_accepted_tokens: a decode row's a with spec decode (1 on padding rows); 0 where the
  // reference passes none (no spec decode, or a prefill row).
  std::int32_t num_accepted = 0;
  // All mode (-1 otherwise): the block of the last computed token cdiv(c, B) - 1, of the first
  // scheduled token cdiv(c + 1, B) - 1, of the last scheduled token cdiv(c + s, B) - 1; the
  // first and last clamped at 0 (padding rows: 0, 0 and 0 as the reference's clamps give
  // for a zero-length row).
  std::int32_t block_idx_last_computed = -1;
  std::int32_t block_idx_first_scheduled = -1;
  std::int32_t block_idx_last_scheduled = -1;
  // All mode with spec decode (-1 otherwise): block_idx_last_scheduled_token_prev_step, where
  // the decode kernels anchor the row's read (vLLM #41233): the block of the last scheduled
  // token of its last decode with drafts when the runner kept that record, else
  // max((c - 1) // B, 0); 0 on padding rows.
  std::int32_t block_idx_prev_step = -1;

  bool operator==(const ForwardMetadataRow&) const = default;
};

struct ForwardMetadata {
  std::int32_t num_decodes = 0;
  std::int32_t num_prefills = 0;
  std::int32_t num_padded = 0; // padding rows after the decodes (a decode-only CUDA-graph step)
  std::vector<ForwardMetadataRow> rows;

  bool operator==(const ForwardMetadata&) const = default;
};

// vLLM's default CUDA-graph capture sizes: 1, 2, 4, then every 8 up to 256, then every 16 up to
// the largest, 512.
std::span<const std::int32_t> cuda_graph_capture_sizes();
// The capture size a decode-only batch of `num_decodes` rows is padded to; none when it is
// larger than every capture size (the step then runs eagerly, unpadded).
std::optional<std::int32_t> cuda_graph_batch_size(std::int32_t num_decodes);

// Where two metadata first differ: the row (-1 for a batch-level count) with its batch row,
// the field ("num_decodes", "state_indices[g][j]", "block_idx_first_scheduled", ...) and
// both values as text.
struct MetadataDifference {
  std::int32_t row = -1;
  std::int32_t batch_row = -1;
  std::string field;
  std::string a, b;
};
std::optional<MetadataDifference> first_metadata_difference(const ForwardMetadata& a,
                                                            const ForwardMetadata& b);
// One line per row, for the step view: "d0 row 2 start 3 ids [[5,6]] a 2".
std::string describe_metadata_row(const ForwardMetadataRow& row);

} // namespace mc::model
