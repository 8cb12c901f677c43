// The plain structs the synthetic forward kernel reads (model/FORWARD.md), built on the host
// by gpu/engine/engine_runner.cpp from model/ metadata. One ForwardOp is one write of one
// kind of state into one block-table column of one batch row: the kernel runs one program
// per (op, tensor of the op's kind) and resolves the block id per group itself. One
// ForwardRead is the initial state a row reads, at the columns the step's metadata names
// (forward_metadata.h): a read program per (read, tensor) compares it with the state the row
// should start from; the runner reports a difference as a finding, and every write of the row
// carries it, as a real kernel's outputs carry its input.
#pragma once

#include <cstdint>

namespace mc::gpu::engine {

inline constexpr int kForwardGroupsMax = 16; // model::kGroupsMax

struct ForwardTensor {
  std::uint64_t base_addr = 0; // block 0 of this state
  std::int64_t block_stride_bytes = 0;
  std::int64_t natural_bytes = 0;
  std::int64_t conv_dim = 0;     // conv: channels
  std::int32_t conv_width = 0;   // conv: state_len L; 0 for temporal
  std::int32_t history_rows = 0; // conv: H (model/conv_history.h)
  std::int32_t elem_size = 0;
  std::int32_t group = 0;
  std::int32_t conv_ds = 0; // 1: DS element order (ch * L + r)
  std::int32_t is_temporal = 0;
};

struct ForwardOp {
  std::int32_t batch_row = 0;    // -1: an unused entry of a CUDA graph's fixed layout
  std::int32_t col = 0;          // block-table column written
  std::int32_t is_temporal = 0;  // 1: temporal state after `hash`; 0: conv window at `running`
  std::int32_t num_computed = 0; // c
  std::int64_t running = 0;      // conv: the window ends before this position
  std::int64_t end = 0;          // conv: c + s, no token at or after it
  std::int64_t token_pos0 = 0;   // conv: position of tokens[token_offset]
  std::int64_t token_offset = 0; // conv: into ForwardParams::tokens
  std::uint64_t hash = 0;        // temporal: running hash of the sequence written
  std::int32_t read = -1;        // the ForwardRead whose differences this write carries; -1: none
};

struct ForwardRead {
  std::int32_t batch_row = 0;    // -1: an unused entry of a CUDA graph's fixed layout
  std::int32_t col = 0;          // block-table column the temporal states are read from
  std::int32_t conv_col = 0;     // block-table column the conv windows are read from
  std::int32_t conv_offset = 0;  // conv: the window starts at this row (align: a - 1)
  std::int64_t num_computed = 0; // c: the state after c tokens is expected
  std::int64_t token_pos0 = 0;   // conv: position of tokens[token_offset]
  std::int64_t token_offset = 0; // conv: into ForwardParams::tokens
  std::uint64_t hash = 0;        // temporal: running hash of the first c tokens
};

struct ForwardParams {
  const ForwardTensor* tensors = nullptr;
  const ForwardOp* ops = nullptr;
  const std::int32_t* tokens = nullptr; // per op's row: tokens at positions token_pos0..end-1
  const ForwardRead* reads = nullptr;
  // Per (read, tensor): the bits in which the block read differs from the expected state,
  // zeroed before the read programs run and ORed by them; 0 where it agrees.
  std::uint64_t* read_diffs = nullptr;
  std::int32_t num_tensors = 0;
  std::int32_t num_ops = 0;
  std::int32_t num_reads = 0;
  std::int32_t row_width = 0;  // meaningful columns of the batch tables
  std::int64_t row_stride = 0; // elements between rows
  std::int64_t num_blocks = 0; // per state tensor
  // The block id the kernels skip, reading and writing nothing (seed 004's null_block_id): 0
  // in a CUDA-graph step, whose padding rows carry it; -1 (none) in an eager one.
  std::int32_t null_block_id = -1;
  std::uint64_t block_tables[kForwardGroupsMax] = {};
};

} // namespace mc::gpu::engine
