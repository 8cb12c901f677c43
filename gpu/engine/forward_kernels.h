// The forward's state kernels of a module under test (an external worker's
// selective_state_update, causal_conv1d_update and selective_scan_fn,
// adapters/python/mambacheck_adapter/forward.py): a step's rows as vLLM's mamba mixer hands them
// to those kernels, what the worker reports they wrote on its tracer states, and the check of
// that against what the metadata says they must read and write (model/FORWARD.md, "External
// forward kernels").
//
// Per decode row s with window W = state_indices_tensor_d[s] (1 + num_spec entries, the null
// block 0 in a CUDA-graph padding row), q tokens and, with spec decode, a = num_accepted[s]:
// - selective_state_update reads W[max(a - 1, 0)] (W[0] without spec decode); a null source
//   writes nothing. With spec decode the state after token t goes to W[t] (not where W[t] is
//   null); without it the state after the one token goes to W[0].
// - causal_conv1d_update reads W[0] at token offset a - 1 (0 without spec decode); a null
//   source writes nothing. It writes W[0] in place from row 0: the history from the row after
//   the offset, width - 2 rows, then the q tokens; rows past those keep what they held.
// - selective_scan_fn (prefill rows, align mode: no prefix-caching arguments) reads the row's
//   one block where it starts from a state (else zeros) and writes the state after its tokens
//   back to it; a null block skips the row.
// In all mode (no spec decode for the decode kernels) a row's window is its whole table row T:
// selective_state_update reads T[block_idx_last_computed] and writes the state after the one
// token to T[block_idx_last_scheduled]; causal_conv1d_update reads the first at offset 0 and
// writes the second (the rows past the new window keep what the written block held);
// selective_scan_fn, with its prefix-caching arguments, starts from T[initial_state_idx] (or
// zeros), writes the state after each block boundary (j + 1) * B inside the chunk to T[j] for
// j in [block_idx_first_scheduled_token, block_idx_last_scheduled_token), and the state after
// all its tokens to T[block_idx_last_scheduled_token].
// Anything else, a write outside the state tensor, or a state that came from outside it, is a
// finding that names the access. A probe row (ForwardKernelStep::probe_row) carries a count
// out of range: it may write its own window from its own window, or nothing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mc::gpu::engine {

struct ForwardKernelStep {
  std::vector<std::string> kernels; // "ssm", "conv": those to run
  std::int64_t num_blocks = 0;
  std::int32_t state_len = 0;              // conv: rows of a block (kernel width - 1 + num_spec)
  std::int32_t conv_width = 0;             // conv: the kernel width (history rows + 1)
  std::int32_t rows = 0;                   // decode rows, then padding rows
  std::int32_t width = 0;                  // entries per row: 1 + num_spec
  std::vector<std::int32_t> state_indices; // rows * width
  // Spec decode only (else empty): per row a, and the rows' token offsets (rows + 1).
  std::vector<std::int32_t> num_accepted;
  std::vector<std::int32_t> query_start_loc;
  // A probe of the kernels' bound on the count: this row's num_accepted is out of range for
  // its window (0, or past the window's last entry, as a stale or racing count reaches a
  // kernel), so the kernels may read any entry of the row's window or none, and write entries
  // of that window with a state read from it, or nothing; reading anything else is a finding.
  // -1: no probe.
  std::int32_t probe_row = -1;
  // The prefill rows, for selective_scan_fn: per row its one block (state_indices_tensor_p),
  // whether it starts from a state (has_initial_state: c > 0), and the rows' token offsets.
  std::vector<std::int32_t> prefill_indices;
  std::vector<std::uint8_t> prefill_initial;
  std::vector<std::int32_t> prefill_query_start_loc{0};

  // All mode (prefix caching of every block): each row carries its whole block-table row,
  // padded with -1 to `width` (decode rows) or `prefill_width` (prefill rows, in
  // prefill_indices), and the block indices the kernels index it with.
  bool all_mode = false;
  std::int32_t block_size = 0;
  // Decode rows (without spec decode): the column read (block_idx_last_computed) and written
  // (block_idx_last_scheduled).
  std::vector<std::int32_t> last_computed, last_scheduled;
  // Prefill rows: the columns of their first and last scheduled tokens, the column read
  // (initial_state_idx), and their computed tokens, a multiple of block_size (the check's
  // own: the kernels find the block boundaries from the chunk's start).
  std::int32_t prefill_width = 1;
  std::vector<std::int32_t> prefill_first, prefill_last, prefill_last_computed, prefill_computed;
};

// The scan's tracer tag step for prefill rows of up to `longest` tokens (a power of two above
// it, at least 64), and whether its values stay exact in float32 over `num_blocks` blocks.
std::int64_t scan_tag(std::int64_t longest);
bool scan_tracer_fits(std::int64_t num_blocks, std::int64_t longest);

// A block the SSM or scan kernel changed: the block whose state it carries and after how many
// tokens (source -2: no state of any block; -3: a value from outside the state tensor; -4:
// started from zeros, no block).
struct SsmWrite {
  std::int32_t block = -1;
  std::int32_t source = -1;
  std::int32_t tokens = 0;
};
// A block the conv kernel changed, row by row: {source block, source row}, {-1, i} for the
// step's token i, {-2, 0} for no row of any block, {-3, 0} for a value from outside the tensor.
struct ConvWrite {
  std::int32_t block = -1;
  std::vector<std::array<std::int32_t, 2>> rows;
};
struct ForwardKernelReport {
  std::vector<SsmWrite> ssm;
  std::vector<std::string> ssm_outside; // "before", "after": guard blocks it wrote
  std::vector<ConvWrite> conv;
  std::vector<std::string> conv_outside;
  std::vector<SsmWrite> scan;
  std::vector<std::string> scan_outside;
};

// The first difference between what the kernels wrote and what they must have, as one line
// naming the kernel, the block, the row (`describe_row(s)`: "row 2 (batch row 1, r7)") and
// both values; nullopt where they agree.
std::optional<std::string>
check_forward_kernels(const ForwardKernelStep& step, const ForwardKernelReport& report,
                      const std::function<std::string(std::int32_t row)>& describe_row);

} // namespace mc::gpu::engine
