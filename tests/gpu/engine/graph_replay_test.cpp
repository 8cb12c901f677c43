// CUDA-graph steps on the host and cuda executors (executor.h, replay_graph): the graph of a
// batch size is captured at its first step and replayed over the inputs the next step copies
// into its buffers in place; the null block and unused entries are skipped; inputs copied into
// fresh buffers leave the replay running on the captured ones; a larger shape is captured anew.
// Without a CUDA device the cuda half says skipped.
#include "gpu/engine/executor.h"
#include "model/arena.h"
#include "model/block_table.h"
#include "model/errors.h"
#include "model/presets.h"
#include "model/stamps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace mc::gpu::engine {
namespace {

class GraphReplay : public ::testing::TestWithParam<model::Backend> {
protected:
  void SetUp() override {
    const model::Preset& preset = model::find_preset("tiny-mamba2");
    model::CacheConfig config = preset.config;
    config.num_spec_tokens = 0;
    config.num_spec_blocks = 0;
    model::LayoutSpec spec = preset.spec;
    spec.num_blocks = 8;
    layout_ = model::build_layout(config, spec);
    for (std::size_t t = 0; t < layout_.tensors.size(); ++t)
      if (layout_.tensors[t].kind() == model::StateKind::temporal) {
        temporal_ = static_cast<std::int32_t>(t);
        break;
      }
    ASSERT_GE(temporal_, 0);
    try {
      executor_ = make_executor(GetParam(), layout_);
    } catch (const model::EnvironmentError& e) {
      GTEST_SKIP() << "no CUDA device (or built without CUDA): " << e.what();
    }
  }

  // Batch size 2, one entry per row: row 0 writes the temporal state `hash` to `block`, row 1
  // is a padding row on the null block; `ops_per_row` 1 unless grown.
  GraphInputs step(std::int32_t block, model::TokenHash hash, std::int32_t ops_per_row = 1) const {
    GraphInputs in{.shape = {.batch_size = 2,
                             .width = 1,
                             .ops_per_row = ops_per_row,
                             .tokens_per_row = 1}};
    for (std::int32_t g = 0; g < layout_.num_groups(); ++g)
      in.state_indices.push_back({block, model::kNullBlockId});
    in.ops.assign(2 * static_cast<std::size_t>(ops_per_row), ForwardOp{.batch_row = -1});
    in.ops[0] = {.batch_row = 0, .col = 0, .is_temporal = 1, .hash = hash};
    in.ops[static_cast<std::size_t>(ops_per_row)] = {
        .batch_row = 1, .col = 0, .is_temporal = 1, .hash = model::kEmptySequenceHash};
    in.reads.assign(2, ForwardRead{.batch_row = -1});
    in.tokens.assign(2, 0);
    return in;
  }

  std::vector<std::byte> block_bytes(std::int32_t block) {
    const model::StateTensor& t = layout_.tensors[static_cast<std::size_t>(temporal_)];
    const model::ArenaRange r{.arena = t.arena,
                              .offset_bytes = t.offset_bytes + block * t.block_stride_bytes,
                              .size_bytes = t.natural_bytes};
    const std::span<const std::byte> got = executor_->read(std::span(&r, 1)).front();
    return {got.begin(), got.end()};
  }
  std::vector<std::byte> state(model::TokenHash hash) const {
    std::vector<std::byte> out(static_cast<std::size_t>(
        layout_.tensors[static_cast<std::size_t>(temporal_)].natural_bytes));
    model::fill_temporal(out, hash, temporal_);
    return out;
  }
  std::vector<std::byte> poison(std::int32_t block) const {
    const model::StateTensor& t = layout_.tensors[static_cast<std::size_t>(temporal_)];
    std::vector<std::byte> out(static_cast<std::size_t>(t.natural_bytes));
    const std::int64_t at = t.offset_bytes + block * t.block_stride_bytes;
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = std::byte{model::poison_byte(at + static_cast<std::int64_t>(i))};
    return out;
  }

  model::Layout layout_;
  std::int32_t temporal_ = -1;
  std::unique_ptr<Executor> executor_;
};

TEST_P(GraphReplay, ReplaysTheStepsInputsCopiedInPlace) {
  executor_->replay_graph(step(3, 111), false); // captured, then run
  EXPECT_EQ(block_bytes(3), state(111));
  executor_->replay_graph(step(5, 222), false);
  EXPECT_EQ(block_bytes(5), state(222));
  EXPECT_EQ(block_bytes(3), state(111));
  // The padding row's write landed nowhere: the null block keeps its poison.
  EXPECT_EQ(block_bytes(model::kNullBlockId), poison(model::kNullBlockId));
  for (std::int32_t b : {1, 2, 4, 6, 7})
    EXPECT_EQ(block_bytes(b), poison(b)) << "block " << b;
}

TEST_P(GraphReplay, FreshBuffersLeaveTheReplayOnTheCapturedOnes) {
  executor_->replay_graph(step(3, 111), false);
  executor_->replay_graph(step(5, 222), true);
  // The replay ran the captured inputs again (block 3, state 111), never block 5's.
  EXPECT_EQ(block_bytes(5), poison(5));
  EXPECT_EQ(block_bytes(3), state(111));
  executor_->replay_graph(step(6, 333), false); // in place again: the captured buffers
  EXPECT_EQ(block_bytes(6), state(333));
}

TEST_P(GraphReplay, ALargerShapeIsCapturedAnew) {
  executor_->replay_graph(step(3, 111), false);
  executor_->replay_graph(step(4, 444, 2), false);
  EXPECT_EQ(block_bytes(4), state(444));
  executor_->replay_graph(step(7, 777, 2), false);
  EXPECT_EQ(block_bytes(7), state(777));
}

TEST_P(GraphReplay, AReadOfTheNullBlockIsUnreadableAndAnUnusedOneReadsNothing) {
  GraphInputs in = step(3, 111);
  // Row 0 reads its state at entry 0 (block 3, poison): differs; row 1's read is unused.
  in.reads[0] = {.batch_row = 0, .col = 0, .conv_col = 0, .num_computed = 1, .hash = 111};
  std::vector<std::uint64_t> diffs = executor_->replay_graph(in, false);
  ASSERT_EQ(diffs.size(), 2 * layout_.tensors.size());
  EXPECT_NE(diffs[static_cast<std::size_t>(temporal_)], 0u);
  for (std::size_t i = layout_.tensors.size(); i < diffs.size(); ++i)
    EXPECT_EQ(diffs[i], 0u) << i;
  // Now block 3 holds state 111: the same read agrees.
  diffs = executor_->replay_graph(in, false);
  EXPECT_EQ(diffs[static_cast<std::size_t>(temporal_)], 0u);
  // Pointed at the null block, row 0's read finds nothing to read.
  for (std::vector<std::int32_t>& ids : in.state_indices)
    ids[0] = model::kNullBlockId;
  diffs = executor_->replay_graph(in, false);
  EXPECT_EQ(diffs[static_cast<std::size_t>(temporal_)], 1u);
}

INSTANTIATE_TEST_SUITE_P(Executors, GraphReplay,
                         ::testing::Values(model::Backend::host, model::Backend::cuda),
                         [](const ::testing::TestParamInfo<model::Backend>& p) {
                           return p.param == model::Backend::host ? std::string("host")
                                                                : std::string("cuda");
                         });

} // namespace
} // namespace mc::gpu::engine
