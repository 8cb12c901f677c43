// Typed Eigen views of the blocks of one state tensor (REFERENCE.md 1, "Geometry").
//
// A state tensor is `[num_blocks, ...dims]` laid over an arena: block `b` starts
// `b * block_stride_bytes` after the tensor's offset, and the page stride may exceed the
// natural size (as_strided page padding). The oracle sees it the way the Python does:
// a strided map `[num_blocks x natural elements]` (one row per block, rows a page stride
// apart), from which each block is taken as a typed tensor:
// - conv SD: `[state_len x dim]`, dim contiguous;
// - conv DS: `[dim x state_len]`, state_len contiguous;
// - temporal: a flat vector of the natural elements (never the page stride: class D).
// Only bytes matter, so elements are unsigned integers of the element size (2, 4, 8).
// Eigen indices are 64-bit, so `block_id * stride` never wraps (class B). A map touches
// nothing until it is read or written: a sparse 5 GiB arena stays sparse.
#pragma once

#include "model/arena.h"
#include "model/errors.h"
#include "model/layout.h"

#include <Eigen/Core>

#include <cstdint>

namespace mc::oracle {

template <typename Elem>
using RowMajorMatrix = Eigen::Matrix<Elem, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One block of a conv state: [state_len x dim] (SD) or [dim x state_len] (DS).
template <typename Elem> using ConvBlock = Eigen::Map<RowMajorMatrix<Elem>>;
// One block of a temporal state: its natural elements in order.
template <typename Elem> using TemporalBlock = Eigen::Map<Eigen::Matrix<Elem, Eigen::Dynamic, 1>>;

template <typename Elem> class StateTensorView {
public:
  // `num_blocks` physical blocks of `tensor` in `arena` (asserted to fit).
  StateTensorView(model::Arena& arena, const model::StateTensor& tensor, std::int64_t num_blocks)
      : tensor_(tensor), blocks_(map_blocks(arena, tensor, num_blocks)) {}

  std::int64_t num_blocks() const { return blocks_.rows(); }

  // Conv block `block_id`, oriented by the layout.
  ConvBlock<Elem> conv(std::int64_t block_id) {
    MC_ASSERT(tensor_.kind() == model::StateKind::conv);
    const std::int64_t state_len = tensor_.shape.conv_state_len;
    const std::int64_t dim = tensor_.shape.conv_dim;
    if (tensor_.conv_layout == model::ConvLayout::SD)
      return ConvBlock<Elem>(block_data(block_id), state_len, dim);
    return ConvBlock<Elem>(block_data(block_id), dim, state_len);
  }

  // Temporal block `block_id`: its natural elements.
  TemporalBlock<Elem> temporal(std::int64_t block_id) {
    MC_ASSERT(tensor_.kind() == model::StateKind::temporal);
    return TemporalBlock<Elem>(block_data(block_id), blocks_.cols());
  }

private:
  using BlocksMap = Eigen::Map<RowMajorMatrix<Elem>, Eigen::Unaligned, Eigen::OuterStride<>>;

  static BlocksMap map_blocks(model::Arena& arena, const model::StateTensor& tensor,
                              std::int64_t num_blocks) {
    MC_ASSERT(static_cast<std::int64_t>(sizeof(Elem)) == tensor.elem_size);
    MC_ASSERT(tensor.offset_bytes % tensor.elem_size == 0);
    MC_ASSERT(tensor.block_stride_bytes % tensor.elem_size == 0);
    MC_ASSERT(tensor.block_stride_bytes >= tensor.natural_bytes);
    MC_ASSERT(num_blocks >= 1);
    MC_ASSERT(tensor.block_offset_bytes(num_blocks - 1) + tensor.natural_bytes <=
              arena.size_bytes());
    Elem* block0 = reinterpret_cast<Elem*>(arena.data() + tensor.offset_bytes);
    return BlocksMap(block0, num_blocks, tensor.natural_bytes / tensor.elem_size,
                     Eigen::OuterStride<>(tensor.block_stride_bytes / tensor.elem_size));
  }

  Elem* block_data(std::int64_t block_id) {
    MC_ASSERT(block_id >= 0 && block_id < blocks_.rows());
    return blocks_.row(block_id).data();
  }

  const model::StateTensor& tensor_;
  BlocksMap blocks_; // [num_blocks x natural elements], rows a page stride apart
};

} // namespace mc::oracle
