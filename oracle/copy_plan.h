// From "this request copies column src to column dst with this bias" to one CopyDecision
// per state tensor (LAUNCH_KINDS.md, "The copy of one state"; REFERENCE.md 2).
//
// A launch kind decides per request row (RowCopy); every state tensor of every group then
// copies with the same columns, looked up in the block table of the tensor's group:
// - conv: read `bt[src_col]` from token `bias` on, write `bt[dst_col]` from token 0;
// - temporal: read `bt[src_col + bias]` whole (the bias picks a column), write `bt[dst_col]`.
// Columns are logical; two columns may name one physical block (prefix caching), which is
// why every decision is made on columns and the block ids are only recorded. Reading the
// table is where bad inputs show: a column outside its row or a block id outside
// [0, num_blocks) (a pad -1, a stride-gap value) is an InputError naming request, tensor
// and index.
#pragma once

#include "model/launch.h"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace mc::oracle {

// The input arrays (their case-file names, model/request_arrays.h) a row copy's columns and bias
// were read or computed from: a bad column or bias is a model::LaunchInputError naming them.
struct CopySources {
  std::span<const std::string_view> src_col;
  std::span<const std::string_view> dst_col;
  std::span<const std::string_view> token_bias;
};

// One request row's copy, as a launch kind decided it (columns, not block ids). Columns and
// bias are 64-bit here: they are computed from token counts and only checked against the
// table (and narrowed to the int32 of a CopyDecision) when the table is read.
struct RowCopy {
  std::int32_t batch_row = 0;
  std::int32_t slot = 0;
  std::int32_t table_row = 0; // where the row's block ids are read: batch_row, or the slot
  std::int64_t src_col = 0;
  std::int64_t dst_col = 0;
  std::int64_t token_bias = 0;
  CopySources from;
};

// The decision for one state tensor of one row copy. Throws model::LaunchInputError on bad
// indices: a column outside its row or a negative bias names the arrays of `from`, a block id
// outside the arena the block table it was read from.
model::CopyDecision plan_state_copy(const model::LaunchCase& launch_case, const RowCopy& row_copy,
                                    std::int32_t tensor);

// Every tensor of every row copy, sorted by (batch_row, tensor).
std::vector<model::CopyDecision> plan_copies(const model::LaunchCase& launch_case,
                                             const std::vector<RowCopy>& row_copies);

// Tokens of the conv window that a copy moves: max(state_len - bias, 0).
std::int64_t conv_tokens_kept(const model::StateTensor& tensor, std::int64_t token_bias);

} // namespace mc::oracle
