// apply_copies (copy.h): the tensor-slice copy of one state, dispatched on the element size.
#include "oracle/copy.h"

#include "model/errors.h"
#include "oracle/copy_plan.h"
#include "oracle/state_view.h"

namespace mc::oracle {
namespace {

template <typename Elem>
void copy_conv(StateTensorView<Elem>& state, const model::StateTensor& tensor,
               const model::CopyDecision& decision) {
  const std::int64_t kept = conv_tokens_kept(tensor, decision.token_bias);
  if (kept == 0) return; // bias >= state_len: an empty slice
  ConvBlock<Elem> src = state.conv(decision.src_block_id);
  ConvBlock<Elem> dst = state.conv(decision.dst_block_id);
  // Blocks of one tensor are disjoint, so only a same-block shift can alias: there, .eval()
  // reads the whole source slice before writing (a memmove); elsewhere no temporary is needed.
  const bool same_block = decision.src_block_id == decision.dst_block_id;
  if (tensor.conv_layout == model::ConvLayout::SD) {
    if (same_block)
      dst.topRows(kept) = src.bottomRows(kept).eval(); // token rows bias.. -> 0..
    else
      dst.topRows(kept) = src.bottomRows(kept);
  } else {
    if (same_block)
      dst.leftCols(kept) = src.rightCols(kept).eval(); // per dim row: tokens bias.. -> 0..
    else
      dst.leftCols(kept) = src.rightCols(kept);
  }
}

template <typename Elem>
void copy_temporal(StateTensorView<Elem>& state, const model::CopyDecision& decision) {
  if (decision.src_block_id == decision.dst_block_id) return; // a whole block onto itself
  TemporalBlock<Elem> src = state.temporal(decision.src_block_id);
  TemporalBlock<Elem> dst = state.temporal(decision.dst_block_id);
  dst = src; // two distinct blocks of one tensor never overlap
}

template <typename Elem>
void apply_typed(model::Arena& arena, const model::StateTensor& tensor, std::int64_t num_blocks,
                 const model::CopyDecision& decision) {
  StateTensorView<Elem> state(arena, tensor, num_blocks);
  if (tensor.kind() == model::StateKind::conv)
    copy_conv(state, tensor, decision);
  else
    copy_temporal(state, decision);
}

} // namespace

void apply_copies(const model::Layout& layout, std::vector<model::Arena>& arenas,
                  std::span<const model::CopyDecision> decisions) {
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
    model::Arena& arena = arenas[static_cast<std::size_t>(t.arena)];
    const std::int64_t num_blocks = layout.spec.num_blocks;
    // Bytes are what matter: each element size maps to an unsigned integer of that size.
    switch (t.elem_size) {
    case 2:
      apply_typed<std::uint16_t>(arena, t, num_blocks, d);
      break;
    case 4:
      apply_typed<std::uint32_t>(arena, t, num_blocks, d);
      break;
    case 8:
      apply_typed<std::uint64_t>(arena, t, num_blocks, d);
      break;
    default:
      MC_ASSERT(false);
    }
  }
}

} // namespace mc::oracle
