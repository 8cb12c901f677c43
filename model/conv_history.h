// How many rows of a conv window hold history, per state tensor (model/FORWARD.md).
//
// mamba2 and gated_delta_net widen their conv window by num_spec rows so that it can carry
// the drafts of a spec-decode step (REFERENCE.md 1: state_len = K - 1 + num_spec); every
// other family keeps K - 1 rows, all of them history. The synthetic forward anchors its
// stamps on this count, and spec decode needs room for drafts (history < state_len).
#pragma once

#include "model/layout.h"

#include <cstdint>

namespace mc::model {

// K - 1 for the conv state `tensor` (index into layout.tensors); asserted to be a conv state.
std::int64_t conv_history_rows(const Layout& layout, std::int32_t tensor);

// The most history rows of any conv state of the layout, at least 1: how many of the last tokens
// before a block boundary a cached block must remember to check its conv states.
std::int32_t conv_history_rows_max(const Layout& layout);

// True when the conv window of `tensor` carries num_spec draft rows beyond its history.
bool conv_window_holds_drafts(const Layout& layout, std::int32_t tensor);

// The first conv state whose window cannot hold the layout's drafts, or -1 (always -1 without
// drafts): spec decode needs num_spec_tokens 0 when there is one.
std::int32_t first_conv_without_drafts(const Layout& layout);

} // namespace mc::model
