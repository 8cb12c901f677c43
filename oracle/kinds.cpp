// The per-kind decisions (kinds.h), each a loop over batch rows as the seed kernels' grids
// are; REFERENCE.md 2 for the post-step save, the V2 pre-step and the V1 copy condition.
#include "oracle/kinds.h"

#include "model/config.h"
#include "model/errors.h"

#include <algorithm>
#include <cstdint>

namespace mc::oracle {
namespace {

// Entry `slot` of a per-request array, const or not.
template <class Array> auto& at(Array& array, std::int32_t slot) {
  return array[static_cast<std::size_t>(slot)];
}

// The slot of batch row `b`: idx_mapping[b] for the V2 kinds (-1 skips), `b` for V1 (the V1
// runner launches with idx_mapping None: its arrays are already in batch order).
std::int32_t slot_of(const model::LaunchCase& launch_case, std::int32_t batch_row) {
  if (!model::uses_idx_mapping(launch_case.kind)) return batch_row;
  return at(launch_case.requests.idx_mapping, batch_row);
}

// Where the row's block ids are read: `bt_row_idx = req_idx` with per-slot tables (#55506:
// a postprocess deferred under pipeline parallelism runs after later steps re-gathered the
// batch-ordered tables, so only the slot still names its request's row), else the batch row
// (the seed: the tables were gathered in this launch's batch order).
std::int32_t table_row_of(const model::LaunchCase& launch_case, std::int32_t batch_row,
                          std::int32_t slot) {
  return model::tables_by_slot(launch_case.kind) ? slot : batch_row;
}

// The arrays each kind reads its columns and bias from, or computes them from (a V1 save: the
// running token count and the accepted drafts; a V2 save: the new computed count).
constexpr std::string_view kStateIdx[] = {"state_idx"};
constexpr std::string_view kSrcCol[] = {"src_col"};
constexpr std::string_view kTokenBias[] = {"token_bias"};
constexpr std::string_view kSaveV1Counts[] = {"num_computed", "num_scheduled", "num_draft",
                                              "num_accepted"};
constexpr std::string_view kSaveV2Counts[] = {"new_num_computed", "num_accepted"};
constexpr CopySources kSaveV1Sources{
    .src_col = kStateIdx, .dst_col = kSaveV1Counts, .token_bias = kSaveV1Counts};
constexpr CopySources kSaveV2Sources{
    .src_col = kStateIdx, .dst_col = kSaveV2Counts, .token_bias = kSaveV2Counts};
constexpr CopySources kPrecopySources{
    .src_col = kSrcCol, .dst_col = kStateIdx, .token_bias = kTokenBias};

RowCopy row_copy(const model::LaunchCase& launch_case, std::int32_t batch_row, std::int32_t slot,
                 std::int64_t src_col, std::int64_t dst_col, std::int64_t token_bias,
                 const CopySources& from) {
  return {.batch_row = batch_row,
          .slot = slot,
          .table_row = table_row_of(launch_case, batch_row, slot),
          .src_col = src_col,
          .dst_col = dst_col,
          .token_bias = token_bias,
          .from = from};
}

// The post-step save of one request (REFERENCE.md 2, "Post-step save").
struct SaveDecision {
  bool copies = false;          // a copy of every state is made
  bool resets_accepted = false; // a becomes 1 (src == dst as columns)
  std::int64_t src_col = 0;
  std::int64_t dst_col = 0;
  std::int64_t token_bias = 0;
};

SaveDecision decide_save(std::int64_t running_tokens, std::int64_t new_num_computed,
                         std::int32_t state_idx, std::int32_t block_size) {
  const std::int64_t aligned = model::floor_div(new_num_computed, block_size) * block_size;
  if (aligned < running_tokens) return {}; // no block boundary reached: a is left alone
  SaveDecision save{.src_col = state_idx,
                    .dst_col = aligned / block_size - 1,
                    .token_bias = aligned - running_tokens};
  // Logical columns, never addresses: aliasing columns still copy (class D).
  save.resets_accepted = state_idx == save.dst_col;
  save.copies = !(state_idx == save.dst_col && save.token_bias == 0);
  return save;
}

} // namespace

std::vector<RowCopy> decide_postprocess(const model::LaunchCase& launch_case,
                                        model::RequestArrays& requests) {
  const model::RequestArrays& in = launch_case.requests;
  const std::int32_t block_size = launch_case.layout.config.mamba_block_size;
  requests.num_accepted_out = in.num_accepted; // as the runner initialises it
  std::vector<RowCopy> copies;
  for (std::int32_t b = 0; b < launch_case.num_reqs; ++b) {
    const std::int32_t s = b;
    const std::int64_t a = at(in.num_accepted, s);
    const std::int64_t running =
        std::int64_t{at(in.num_computed, s)} + at(in.num_scheduled, s) - at(in.num_draft, s);
    const SaveDecision save =
        decide_save(running, running + a - 1, at(in.state_idx, s), block_size);
    if (save.resets_accepted) at(requests.num_accepted_out, s) = 1;
    if (save.copies)
      copies.push_back(
          row_copy(launch_case, b, s, save.src_col, save.dst_col, save.token_bias, kSaveV1Sources));
  }
  return copies;
}

std::vector<RowCopy> decide_postprocess_align(const model::LaunchCase& launch_case,
                                              model::RequestArrays& requests) {
  const model::RequestArrays& in = launch_case.requests; // a as the launch started
  const std::int32_t block_size = launch_case.layout.config.mamba_block_size;
  std::vector<RowCopy> copies;
  for (std::int32_t b = 0; b < launch_case.num_reqs; ++b) {
    const std::int32_t s = slot_of(launch_case, b);
    if (s < 0) continue;
    const std::int64_t a = at(in.num_accepted, s);
    const std::int64_t new_num_computed = at(in.new_num_computed, s);
    const SaveDecision save =
        decide_save(new_num_computed - a + 1, new_num_computed, at(in.state_idx, s), block_size);
    if (save.resets_accepted) at(requests.num_accepted, s) = 1; // an output only
    if (save.copies)
      copies.push_back(
          row_copy(launch_case, b, s, save.src_col, save.dst_col, save.token_bias, kSaveV2Sources));
  }
  return copies;
}

std::vector<RowCopy> decide_precopy(const model::LaunchCase& launch_case) {
  const model::RequestArrays& in = launch_case.requests;
  std::vector<RowCopy> copies;
  for (std::int32_t b = 0; b < launch_case.num_reqs; ++b) {
    const std::int32_t s = slot_of(launch_case, b);
    if (s < 0) continue;
    const std::int32_t src_col = at(in.src_col, s);
    const std::int32_t dst_col = at(in.state_idx, s);
    // A fresh state, or still the same block: the forward finds it in place through a.
    if (src_col < 0 || src_col == dst_col) continue;
    copies.push_back(
        row_copy(launch_case, b, s, src_col, dst_col, at(in.token_bias, s), kPrecopySources));
  }
  return copies;
}

void decide_preprocess_align(const model::LaunchCase& launch_case, model::RequestArrays& requests) {
  const model::RequestArrays& in = launch_case.requests;
  const std::int32_t block_size = launch_case.layout.config.mamba_block_size;
  for (std::int32_t b = 0; b < launch_case.num_reqs; ++b) {
    const std::int32_t s = slot_of(launch_case, b);
    if (s < 0) continue;
    const std::int32_t old_state_idx = at(in.state_idx, s);
    const std::int64_t a = at(in.num_accepted, s);
    at(requests.src_col, s) = old_state_idx;
    at(requests.token_bias, s) = static_cast<std::int32_t>(std::max<std::int64_t>(a - 1, 0));
    const std::int64_t query_len =
        std::int64_t{at(in.query_start_loc, b + 1)} - at(in.query_start_loc, b);
    const auto new_state_idx = static_cast<std::int32_t>(
        model::cdiv(std::int64_t{at(in.num_computed, s)} + query_len, block_size) - 1);
    at(requests.state_idx, s) = new_state_idx;
    if (old_state_idx >= 0 && old_state_idx != new_state_idx) at(requests.num_accepted, s) = 1;
  }
}

std::vector<RowCopy> decide_batch_copy(const model::LaunchCase& launch_case) {
  MC_ASSERT(!model::uses_idx_mapping(launch_case.kind));
  return decide_precopy(launch_case); // same condition as preprocess_mamba, rows are slots
}

} // namespace mc::oracle
