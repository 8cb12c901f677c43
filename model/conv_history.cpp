#include "model/conv_history.h"

#include "model/errors.h"

#include <algorithm>

namespace mc::model {

bool conv_window_holds_drafts(const Layout& layout, std::int32_t tensor) {
  const StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  MC_ASSERT(t.kind() == StateKind::conv);
  const Family family = layout.spec.groups[static_cast<std::size_t>(t.group)].family;
  return family == Family::mamba2 || family == Family::gated_delta_net;
}

std::int32_t first_conv_without_drafts(const Layout& layout) {
  if (layout.config.num_spec_tokens == 0) return -1;
  for (std::size_t t = 0; t < layout.tensors.size(); ++t)
    if (layout.tensors[t].kind() == StateKind::conv &&
        !conv_window_holds_drafts(layout, static_cast<std::int32_t>(t)))
      return static_cast<std::int32_t>(t);
  return -1;
}

std::int64_t conv_history_rows(const Layout& layout, std::int32_t tensor) {
  const StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  const std::int64_t rows =
      t.shape.conv_state_len -
      (conv_window_holds_drafts(layout, tensor) ? layout.config.num_spec_tokens : 0);
  MC_ASSERT(rows >= 0);
  return rows;
}

std::int32_t conv_history_rows_max(const Layout& layout) {
  std::int64_t rows = 1;
  for (std::size_t t = 0; t < layout.tensors.size(); ++t)
    if (layout.tensors[t].kind() == StateKind::conv)
      rows = std::max(rows, conv_history_rows(layout, static_cast<std::int32_t>(t)));
  return static_cast<std::int32_t>(rows);
}

} // namespace mc::model
