// The lockstep loop's arena comparison (harness/arena_compare.h): small arenas are compared
// whole after every step; large ones compare the blocks each step wrote, and every byte every
// N steps and after the last, so a write outside the step's blocks is still found and its
// difference says since when it may date. Then through simulate(): every runner mutant that
// a whole comparison after every step kills, the blocks-written comparison kills at the same
// step.
#include "harness/arena_compare.h"
#include "harness/replay.h"
#include "harness/simulate.h"
#include "model/errors.h"
#include "model/presets.h"
#include "tests/harness/mutant_runs.h"
#include "tests/model/temp_dir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mc::harness {
namespace {

using oracle::engine::BlockAccess;

class Comparer : public ::testing::Test {
protected:
  void SetUp() override {
    const model::Preset& p = model::find_preset("tiny-mamba2");
    layout_ = model::build_layout(p.config, p.spec);
    for (const model::ArenaSpec& a : layout_.arenas) {
      ours_.emplace_back(a.size_bytes());
      ours_.back().poison();
      theirs_.emplace_back(a.size_bytes());
      theirs_.back().poison();
    }
    oracle_.read = [this](const model::ArenaRange& r, std::span<std::byte> out) {
      std::memcpy(out.data(), ours_[static_cast<std::size_t>(r.arena)].data() + r.offset_bytes,
                  out.size());
    };
    backend_ = {.whole = [this]() -> const std::vector<model::Arena>& {
                  ++whole_reads_;
                  return theirs_;
                },
                .read = [this](std::span<const model::ArenaRange> ranges) {
                  std::vector<std::span<const std::byte>> out;
                  for (const model::ArenaRange& r : ranges) {
                    ++ranges_read_;
                    out.push_back(theirs_[static_cast<std::size_t>(r.arena)].bytes().subspan(
                        static_cast<std::size_t>(r.offset_bytes),
                        static_cast<std::size_t>(r.size_bytes)));
                  }
                  return out;
                }};
  }

  // Byte `at` of block `block` of tensor `tensor`, in one side's arenas.
  std::byte& byte(std::vector<model::Arena>& side, std::int32_t tensor, std::int32_t block,
                  std::int64_t at) {
    const model::StateTensor& t = layout_.tensors[static_cast<std::size_t>(tensor)];
    return side[static_cast<std::size_t>(t.arena)].data()[t.block_offset_bytes(block) + at];
  }

  static std::vector<BlockAccess> wrote(std::int32_t tensor, std::int32_t block) {
    return {BlockAccess{.tensor = tensor, .block_id = block}};
  }

  model::Layout layout_;
  std::vector<model::Arena> ours_, theirs_;
  OracleStates oracle_;
  BackendArenas backend_;
  int whole_reads_ = 0;
  int ranges_read_ = 0;
};

TEST_F(Comparer, SmallArenasAreComparedWholeAfterEveryStep) {
  ArenaComparer c(layout_, {});
  EXPECT_TRUE(c.whole_every_step());
  byte(theirs_, 1, 5, 7) ^= std::byte{1}; // a block the step did not write
  const std::optional<Difference> d = c.after_step(oracle_, backend_, wrote(0, 3), 0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, "arena");
  EXPECT_EQ(d->tensor, 1);
  EXPECT_EQ(d->block, 5);
  EXPECT_EQ(d->byte_begin, 7);
  EXPECT_EQ(d->byte_end, 8);
  EXPECT_EQ(d->text.find("found when"), std::string::npos) << d->text;
  EXPECT_EQ(whole_reads_, 1);
  EXPECT_EQ(ranges_read_, 0);
  EXPECT_FALSE(c.finish(oracle_, backend_, 0)); // the step's comparison was whole already
}

TEST_F(Comparer, ABlockTheStepWroteIsComparedThatStep) {
  ArenaComparer c(layout_, {.whole_bytes_max = 0, .whole_every = 64});
  EXPECT_FALSE(c.whole_every_step());
  byte(ours_, 1, 4, 10) = std::byte{0x11};
  byte(theirs_, 1, 4, 10) = std::byte{0x11}; // both wrote the same: held
  EXPECT_FALSE(c.after_step(oracle_, backend_, wrote(1, 4), 0));
  byte(ours_, 1, 4, 12) = std::byte{0x22}; // the backend missed this write
  const std::optional<Difference> d = c.after_step(oracle_, backend_, wrote(1, 4), 1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tensor, 1);
  EXPECT_EQ(d->block, 4);
  EXPECT_EQ(d->byte_begin, 12);
  EXPECT_EQ(d->byte_end, 13);
  EXPECT_EQ(whole_reads_, 0);
  EXPECT_EQ(ranges_read_, 2);
  EXPECT_EQ(c.bytes_compared(), 2 * layout_.tensors[1].natural_bytes);
}

TEST_F(Comparer, AWriteOutsideTheStepsBlocksIsFoundByTheNextWholeComparison) {
  ArenaComparer c(layout_, {.whole_bytes_max = 0, .whole_every = 3});
  byte(theirs_, 2, 6, 0) ^= std::byte{0x80}; // a stray write at step 0
  EXPECT_FALSE(c.after_step(oracle_, backend_, wrote(0, 3), 0));
  EXPECT_FALSE(c.after_step(oracle_, backend_, wrote(0, 3), 1));
  const std::optional<Difference> d = c.after_step(oracle_, backend_, wrote(0, 3), 2);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tensor, 2);
  EXPECT_EQ(d->block, 6);
  EXPECT_NE(d->text.find("found when the whole arenas were compared after step 2; they had not "
                         "been compared whole before"),
            std::string::npos)
      << d->text;
  EXPECT_EQ(whole_reads_, 1);
}

TEST_F(Comparer, TheWholeDifferenceSaysWhenTheArenasLastMatched) {
  ArenaComparer c(layout_, {.whole_bytes_max = 0, .whole_every = 2});
  EXPECT_FALSE(c.after_step(oracle_, backend_, {}, 10));
  EXPECT_FALSE(c.after_step(oracle_, backend_, {}, 11)); // whole, held
  EXPECT_FALSE(c.after_step(oracle_, backend_, {}, 12));
  byte(theirs_, 3, 2, 1) ^= std::byte{1};
  const std::optional<Difference> d = c.after_step(oracle_, backend_, {}, 13);
  ASSERT_TRUE(d);
  EXPECT_NE(d->text.find("after step 13; they last matched whole after step 11"),
            std::string::npos)
      << d->text;
  EXPECT_EQ(c.coverage().whole_comparisons, 2);
}

TEST_F(Comparer, FinishComparesWholeWhenTheLastStepDidNot) {
  ArenaComparer c(layout_, {.whole_bytes_max = 0, .whole_every = 64});
  EXPECT_FALSE(c.after_step(oracle_, backend_, wrote(0, 1), 0));
  byte(theirs_, 0, 9, 3) ^= std::byte{4};
  const std::optional<Difference> d = c.finish(oracle_, backend_, 0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block, 9);
  EXPECT_EQ(c.coverage().text(),
            "the blocks each step wrote, whole arenas every 64 steps and after the last (1 "
            "times)");
}

TEST_F(Comparer, WrittenRangesAreDistinctAndInsideThePool) {
  std::vector<BlockAccess> writes = {{.tensor = 1, .block_id = 4},  {.tensor = 0, .block_id = 2},
                                     {.tensor = 1, .block_id = 4},  {.tensor = 1, .block_id = -1},
                                     {.tensor = 0, .block_id = 64}, {.tensor = 99, .block_id = 1}};
  const std::vector<model::ArenaRange> r = ArenaComparer::written_ranges(layout_, writes);
  ASSERT_EQ(r.size(), 2u);
  const model::StateTensor& t0 = layout_.tensors[0];
  const model::StateTensor& t1 = layout_.tensors[1];
  EXPECT_EQ(r[0].arena, t0.arena);
  EXPECT_EQ(r[0].offset_bytes, t0.block_offset_bytes(2));
  EXPECT_EQ(r[0].size_bytes, t0.natural_bytes);
  EXPECT_EQ(r[1].offset_bytes, t1.block_offset_bytes(4));
  EXPECT_EQ(r[1].size_bytes, t1.natural_bytes);
}

TEST(ComparerPolicy, ZeroStepsBetweenWholeComparisonsIsRefused) {
  const model::Preset& p = model::find_preset("tiny-mamba2");
  const model::Layout layout = model::build_layout(p.config, p.spec);
  EXPECT_THROW(ArenaComparer(layout, {.whole_every = 0}), model::InputError);
}

// Every runner mutant a whole comparison after every step kills on this run, the blocks-written
// comparison (no whole comparison until after the last step) kills at the same step with the
// same difference.
TEST(ComparerThroughRuns, TheBlocksWrittenKillWhatTheWholeComparisonKills) {
  int killed = 0;
  for (SimulationOptions s : testing::runner_mutant_runs()) {
    const SimulationResult whole = simulate(s);
    s.arena_compare = {.whole_bytes_max = 0, .whole_every = 1'000'000};
    const SimulationResult blocks = simulate(s);
    const std::string name{gpu::engine::to_string(s.runner_mutant)};
    ASSERT_EQ(whole.held(), blocks.held()) << name;
    if (whole.held()) { // clean, or a mutant of another mode or runner
      EXPECT_FALSE(blocks.arenas.whole_every_step);
      EXPECT_EQ(blocks.arenas.whole_comparisons, 1);
      continue;
    }
    ++killed;
    ASSERT_EQ(whole.mismatch.has_value(), blocks.mismatch.has_value()) << name;
    if (whole.mismatch) {
      EXPECT_EQ(whole.mismatch->step, blocks.mismatch->step) << name;
      EXPECT_EQ(whole.mismatch->text, blocks.mismatch->text) << name;
    }
  }
  // The mutant-and-runner pairs this workload reaches: 22 before the forward's five mutants,
  // which add 8 (the metadata and read differences come before any arena comparison), and 3
  // for graph_buffers_reallocated (a replay's stale writes, found in the blocks written), then 2
  // each for zero_draft_rows_off_spec_path and graph_dispatch_by_shape (align, V1 and V2: their
  // metadata differs first). accepted_counts_read_after_condense needs async scheduling, which
  // this run does not use.
  EXPECT_EQ(killed, 37);
}

// The oracle keeps what each block means; `--reference` keeps the bytes (state_store.h). Every
// runner mutant and every kernel mutant ends a run on both at the same step with the same text,
// and a clean run compares the same bytes: with the meanings alone, which the backend compares
// against from the oracle's descriptions (a large pool's path, and the cuda executor's), and with
// the byte mirror a small pool keeps beside them.
// The meanings alone, without the byte mirror a tiny preset's small pool keeps, while it lives.
struct MeaningsAlone {
  MeaningsAlone() { oracle::engine::set_byte_mirror_bytes_max_for_testing(0); }
  ~MeaningsAlone() { oracle::engine::set_byte_mirror_bytes_max_for_testing(-1); }
  MeaningsAlone(const MeaningsAlone&) = delete;
  MeaningsAlone& operator=(const MeaningsAlone&) = delete;
};

template <class Run, class Result = std::invoke_result_t<Run, oracle::engine::Structures>>
void expect_three_agree(const std::string& name, Run run, int& killed) {
  Result meant;
  {
    const MeaningsAlone alone;
    meant = run(oracle::engine::Structures::fast);
  }
  const Result mirrored = run(oracle::engine::Structures::fast);
  const Result bytes = run(oracle::engine::Structures::reference);
  ASSERT_NO_FATAL_FAILURE(testing::expect_same_outcome(name, meant.mismatch, bytes.mismatch));
  ASSERT_NO_FATAL_FAILURE(testing::expect_same_outcome(name, mirrored.mismatch, bytes.mismatch));
  ASSERT_EQ(meant.finding.has_value(), bytes.finding.has_value()) << name;
  EXPECT_EQ(meant.bytes_compared, bytes.bytes_compared) << name;
  EXPECT_EQ(mirrored.bytes_compared, bytes.bytes_compared) << name;
  killed += meant.mismatch || meant.finding ? 1 : 0;
}

TEST(MeaningsAndBytes, EveryRunnerMutantEndsTheSameOnAll) {
  int killed = 0;
  for (SimulationOptions s : testing::runner_mutant_runs()) {
    s.arena_compare = {.whole_bytes_max = 0, .whole_every = 7}; // both ways of comparing
    const auto run = [&](oracle::engine::Structures structures) {
      s.engine.structures = structures;
      return simulate(s);
    };
    ASSERT_NO_FATAL_FAILURE(
        expect_three_agree(std::string(gpu::engine::to_string(s.runner_mutant)), run, killed));
  }
  EXPECT_EQ(killed, 37); // as the comparison of the blocks written kills them
}

TEST(MeaningsAndBytes, EveryKernelMutantEndsTheSameOnAll) {
  model::testing::TempDir dir;
  const std::filesystem::path trace = testing::record_clean_run(dir.path());
  int killed = 0;
  for (std::size_t m = 1; m <= gpu::kernel_mutants().size(); ++m) {
    const auto mutant = static_cast<gpu::Mutant>(m);
    if (!gpu::kernel_mutants()[m - 1].memory_safe) continue; // may fault the host executor
    ReplayOptions o{.kernel_mutant = mutant};
    o.arena_compare = {.whole_bytes_max = 0, .whole_every = 5};
    const auto run = [&](oracle::engine::Structures structures) {
      o.structures = structures;
      return replay_file(trace, o);
    };
    ASSERT_NO_FATAL_FAILURE(expect_three_agree(std::string(gpu::to_string(mutant)), run, killed));
  }
  EXPECT_GT(killed, 10);
}

} // namespace
} // namespace mc::harness
