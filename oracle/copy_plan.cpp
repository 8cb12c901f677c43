// plan_state_copy / plan_copies (copy_plan.h): columns -> block ids -> CopyDecision, with the
// column and block-id checks of LAUNCH_KINDS.md "Validity" made where the table is read.
#include "oracle/copy_plan.h"

#include "model/errors.h"
#include "model/launch_kinds.h"
#include "oracle/describe.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace mc::oracle {
namespace {

const model::StateTensor& tensor_at(const model::Layout& layout, std::int32_t tensor) {
  return layout.tensors[static_cast<std::size_t>(tensor)];
}

std::vector<std::string> names_of(std::span<const std::string_view> first,
                                  std::span<const std::string_view> second = {}) {
  std::vector<std::string> names(first.begin(), first.end());
  for (const std::string_view name : second)
    if (std::find(names.begin(), names.end(), name) == names.end()) names.emplace_back(name);
  return names;
}

// bt(row, col) of `table`, after checking that the column (computed from the arrays `col_from`
// and `col_from_too`) lies inside the row and that the block id it holds is a real block.
std::int32_t read_block_id(const model::LaunchCase& launch_case, const RowCopy& row_copy,
                           std::int32_t tensor, const char* role, std::int64_t col,
                           std::span<const std::string_view> col_from,
                           std::span<const std::string_view> col_from_too = {}) {
  const model::StateTensor& t = tensor_at(launch_case.layout, tensor);
  const model::BlockTable& table =
      launch_case.block_tables.groups[static_cast<std::size_t>(t.group)];
  if (col < 0 || col >= table.row_width)
    model::fail_launch_input(
        names_of(col_from, col_from_too),
        "launch {}: {}, {}: {} column {} is outside the block table row "
        "[0, {})",
        model::to_string(launch_case.kind), describe_row(row_copy.batch_row, row_copy.slot),
        describe_tensor(launch_case.layout, tensor), role, col, table.row_width);
  const std::int32_t block_id = table.at(row_copy.table_row, static_cast<std::int32_t>(col));
  const std::int64_t num_blocks = launch_case.layout.spec.num_blocks;
  if (block_id < 0 || block_id >= num_blocks)
    model::fail_launch_input(
        {model::block_table_array_name(static_cast<std::size_t>(t.group))},
        "launch {}: {}, {}: {} column {} holds block id {}, outside [0, {})",
        model::to_string(launch_case.kind), describe_row(row_copy.batch_row, row_copy.slot),
        describe_tensor(launch_case.layout, tensor), role, col, block_id, num_blocks);
  return block_id;
}

} // namespace

std::int64_t conv_tokens_kept(const model::StateTensor& tensor, std::int64_t token_bias) {
  MC_ASSERT(tensor.kind() == model::StateKind::conv);
  MC_ASSERT(token_bias >= 0);
  return std::max<std::int64_t>(tensor.shape.conv_state_len - token_bias, 0);
}

model::CopyDecision plan_state_copy(const model::LaunchCase& launch_case, const RowCopy& row_copy,
                                    std::int32_t tensor) {
  const model::StateTensor& t = tensor_at(launch_case.layout, tensor);
  if (row_copy.token_bias < 0)
    model::fail_launch_input(
        names_of(row_copy.from.token_bias), "launch {}: {}, {}: token bias {} is negative",
        model::to_string(launch_case.kind), describe_row(row_copy.batch_row, row_copy.slot),
        describe_tensor(launch_case.layout, tensor), row_copy.token_bias);
  model::CopyDecision d{.batch_row = row_copy.batch_row,
                        .slot = row_copy.slot,
                        .tensor = tensor,
                        .group = t.group,
                        .layer = t.layer,
                        .state = t.state,
                        .src_col = static_cast<std::int32_t>(row_copy.src_col),
                        .dst_col = static_cast<std::int32_t>(row_copy.dst_col),
                        .token_bias = static_cast<std::int32_t>(row_copy.token_bias)};
  const std::int64_t bias = row_copy.token_bias;
  if (t.kind() == model::StateKind::temporal) {
    // The bias selects the speculative column that holds the accepted state.
    d.src_block_id = read_block_id(launch_case, row_copy, tensor, "src", row_copy.src_col + bias,
                                   row_copy.from.src_col, row_copy.from.token_bias);
    d.src_byte_offset = 0;
    d.bytes = t.natural_bytes; // never the page stride (class D)
  } else if (t.conv_layout == model::ConvLayout::SD) {
    d.src_block_id = read_block_id(launch_case, row_copy, tensor, "src", row_copy.src_col,
                                   row_copy.from.src_col);
    d.src_byte_offset = bias * t.shape.conv_dim * t.elem_size;
    d.bytes = conv_tokens_kept(t, bias) * t.shape.conv_dim * t.elem_size;
  } else {
    d.src_block_id = read_block_id(launch_case, row_copy, tensor, "src", row_copy.src_col,
                                   row_copy.from.src_col);
    d.src_byte_offset = bias * t.elem_size; // within each dim row
    d.bytes = t.shape.conv_dim * conv_tokens_kept(t, bias) * t.elem_size;
  }
  d.dst_block_id =
      read_block_id(launch_case, row_copy, tensor, "dst", row_copy.dst_col, row_copy.from.dst_col);
  return d;
}

std::vector<model::CopyDecision> plan_copies(const model::LaunchCase& launch_case,
                                             const std::vector<RowCopy>& row_copies) {
  const auto num_tensors = static_cast<std::int32_t>(launch_case.layout.tensors.size());
  std::vector<model::CopyDecision> decisions;
  decisions.reserve(row_copies.size() * static_cast<std::size_t>(num_tensors));
  for (const RowCopy& row_copy : row_copies)
    for (std::int32_t tensor = 0; tensor < num_tensors; ++tensor)
      decisions.push_back(plan_state_copy(launch_case, row_copy, tensor));
  const auto before = [](const model::CopyDecision& x, const model::CopyDecision& y) {
    return std::tie(x.batch_row, x.tensor) < std::tie(y.batch_row, y.tensor);
  };
  // Row copies come in batch order from every kind, so this is usually already strictly
  // ordered and the sort would change nothing (checked, not assumed).
  const bool strictly_ordered = std::adjacent_find(decisions.begin(), decisions.end(),
                                                   [&before](const auto& x, const auto& y) {
                                                     return !before(x, y);
                                                   }) == decisions.end();
  if (!strictly_ordered) std::sort(decisions.begin(), decisions.end(), before);
  return decisions;
}

} // namespace mc::oracle
