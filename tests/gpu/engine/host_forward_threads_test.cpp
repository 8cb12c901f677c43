// The host executor's forward over several threads (model/parallel.h) leaves the bytes and read
// differences one thread leaves, also where a wrong table makes many rows write one block: the
// writes of a block run in program order, so the last row's state is the one that stays.
#include "gpu/engine/executor.h"
#include "model/block_table.h"
#include "model/presets.h"
#include "model/stamps.h"
#include "tests/model/work_threads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace mc::gpu::engine {
namespace {

constexpr std::int32_t kRows = 64;

struct Forward {
  model::BlockTables tables;
  std::vector<ForwardOp> ops;
  std::vector<ForwardRead> reads;
  std::vector<std::int32_t> tokens;
};

// Every row writes its temporal state and conv window to block 3 (even rows) or 5 (odd rows),
// each from tokens of its own, but row 7, which has block 6 to itself; rows 0..7 first read
// what they are about to write.
Forward conflicting_forward(const model::Layout& layout) {
  Forward f;
  for (std::int32_t g = 0; g < layout.num_groups(); ++g) {
    model::BlockTable t = model::BlockTable::make(kRows, 1, 1);
    for (std::int32_t row = 0; row < kRows; ++row)
      t.at(row, 0) = row % 2 == 0 ? 3 : 5;
    t.at(7, 0) = 6;
    f.tables.groups.push_back(std::move(t));
  }
  for (std::int32_t i = 0; i < kRows + 8; ++i)
    f.tokens.push_back(
        static_cast<std::int32_t>(model::mix64(static_cast<std::uint64_t>(i)) % 5000));
  for (std::int32_t row = 0; row < kRows; ++row) {
    f.ops.push_back({.batch_row = row,
                     .col = 0,
                     .is_temporal = 1,
                     .hash = model::mix64(100 + static_cast<std::uint64_t>(row))});
    f.ops.push_back({.batch_row = row,
                     .col = 0,
                     .num_computed = 3,
                     .running = 3,
                     .end = 3,
                     .token_pos0 = 0,
                     .token_offset = row});
  }
  for (std::int32_t row = 0; row < 8; ++row)
    f.reads.push_back({.batch_row = row,
                       .num_computed = 3,
                       .token_offset = row,
                       .hash = model::mix64(100 + static_cast<std::uint64_t>(row))});
  return f;
}

struct Ran {
  std::vector<std::uint64_t> diffs;
  std::vector<std::vector<std::byte>> arenas;
};

Ran run_forward(const model::Layout& layout, const Forward& f, std::int64_t threads) {
  const model::test::WorkThreads every_forward_threaded(threads, 0);
  const std::unique_ptr<Executor> executor = make_executor(model::Backend::host, layout);
  Ran ran;
  executor->forward(f.tables, f.ops, f.reads, f.tokens); // reads poison
  ran.diffs = executor->forward(f.tables, f.ops, f.reads, f.tokens);
  for (const model::Arena& a : executor->arenas())
    ran.arenas.emplace_back(a.bytes().begin(), a.bytes().end());
  return ran;
}

TEST(HostForwardThreads, ManyRowsWritingOneBlockLeaveTheBytesOfOneThread) {
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  model::LayoutSpec spec = preset.spec;
  spec.num_blocks = 8;
  const model::Layout layout = model::build_layout(preset.config, spec);
  const Forward f = conflicting_forward(layout);
  const Ran serial = run_forward(layout, f, 1);
  // The last even row (62) wrote block 3 last: its temporal state is the one that stayed.
  for (std::size_t t = 0; t < layout.tensors.size(); ++t) {
    const model::StateTensor& tensor = layout.tensors[t];
    if (tensor.kind() != model::StateKind::temporal) continue;
    std::vector<std::byte> want(static_cast<std::size_t>(tensor.natural_bytes));
    model::fill_temporal(want, model::mix64(100 + 62), static_cast<std::int32_t>(t));
    const std::byte* got = serial.arenas[static_cast<std::size_t>(tensor.arena)].data() +
                           tensor.offset_bytes + 3 * tensor.block_stride_bytes;
    EXPECT_EQ(std::memcmp(got, want.data(), want.size()), 0) << "tensor " << t;
  }
  for (const std::int64_t threads : {2, 3, 8}) {
    const Ran parallel = run_forward(layout, f, threads);
    EXPECT_EQ(parallel.diffs, serial.diffs) << threads << " threads";
    ASSERT_EQ(parallel.arenas.size(), serial.arenas.size());
    for (std::size_t a = 0; a < serial.arenas.size(); ++a)
      EXPECT_TRUE(parallel.arenas[a] == serial.arenas[a])
          << "arena " << a << ", " << threads << " threads";
  }
  // Rows 0..6 read block 3 or 5, which rows 62 and 63 wrote last: every tensor differs. Row 7
  // alone reads block 6, its own write of the first forward: every tensor agrees.
  const std::size_t num_tensors = layout.tensors.size();
  ASSERT_EQ(serial.diffs.size(), 8 * num_tensors);
  for (std::size_t i = 0; i < serial.diffs.size(); ++i)
    EXPECT_EQ(serial.diffs[i] == 0, i / num_tensors == 7)
        << "read " << i / num_tensors << ", tensor " << i % num_tensors;
}

} // namespace
} // namespace mc::gpu::engine
