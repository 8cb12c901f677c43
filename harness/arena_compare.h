// How much of the arenas the lockstep loop compares after each step.
//
// Small arenas are compared whole after every step. Past `whole_bytes_max` (a production
// layout at full depth holds gigabytes, and a step touches a few blocks of it), each step
// compares the blocks the oracle wrote in it, byte for byte, and the whole arenas after every
// `whole_every` steps and after the last compared step. A byte the backend wrote where no
// step expected a write is then found at most whole_every - 1 steps late, and its difference
// says since which step it may date. The cost per step follows the work the step did, not the
// pool's size: the cuda executor downloads only those blocks.
#pragma once

#include "harness/difference.h"
#include "model/arena.h"
#include "model/expected_bytes.h"
#include "model/layout.h"
#include "oracle/engine/writes.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mc::harness {

struct ArenaComparePolicy {
  std::int64_t whole_bytes_max = std::int64_t{64} << 20;
  std::int64_t whole_every = 64; // 1: whole arenas after every step, whatever their size
};

// The oracle's side of a comparison (oracle::engine::StateStore: the default oracle keeps what
// each block means and makes bytes only here).
struct OracleStates {
  // The bytes of `range` as the oracle holds them, into `out`.
  std::function<void(const model::ArenaRange& range, std::span<std::byte> out)> read;
  // Optional: what `ranges` must hold, or what every byte must (`ranges` empty: the whole
  // arenas), for a backend that compares where its bytes are; false where the oracle cannot
  // say it so.
  std::function<bool(std::span<const model::ArenaRange> ranges, model::ExpectedStates& out)>
      describe;
};

// The backend's side of a comparison (gpu::engine::EngineRunner's arenas() and read()).
struct BackendArenas {
  std::function<const std::vector<model::Arena>&()> whole;
  std::function<std::vector<std::span<const std::byte>>(std::span<const model::ArenaRange>)> read;
  // Optional: compares its bytes with `expected` where they are (a device) and returns per
  // range the first byte that differs, -1 where every byte holds.
  std::function<std::vector<std::int64_t>(const model::ExpectedStates& expected)> compare;
};

// How a run compared its arenas, for its summary.
struct ArenaCoverage {
  bool whole_every_step = true;
  std::int64_t whole_every = 1;
  std::int64_t whole_comparisons = 0;
  // "whole arenas after every step", or "the blocks each step wrote, whole arenas every N
  // steps and after the last (K times)".
  std::string text() const;
};

class ArenaComparer {
public:
  // Throws model::InputError for whole_every < 1.
  ArenaComparer(const model::Layout& layout, ArenaComparePolicy policy);

  bool whole_every_step() const { return whole_every_step_; }

  // After step `step` held its records: the blocks in `writes` (those the oracle wrote in the
  // step), or the whole arenas when it is their turn.
  std::optional<Difference> after_step(const OracleStates& oracle, const BackendArenas& backend,
                                       std::span<const oracle::engine::BlockAccess> writes,
                                       std::int64_t step);
  // After the last compared step `step`: the whole arenas, unless after_step just compared
  // them.
  std::optional<Difference> finish(const OracleStates& oracle, const BackendArenas& backend,
                                   std::int64_t step);

  std::int64_t bytes_compared() const { return bytes_compared_; }
  ArenaCoverage coverage() const {
    return {.whole_every_step = whole_every_step_,
            .whole_every = policy_.whole_every,
            .whole_comparisons = whole_comparisons_};
  }

  // The ranges of the blocks in `writes`, one per distinct (tensor, block), in arena order;
  // writes to ids outside the pool (the null block's pad slots) are left out.
  static std::vector<model::ArenaRange> written_ranges(
      const model::Layout& layout, std::span<const oracle::engine::BlockAccess> writes);

private:
  std::optional<Difference> compare_whole(const OracleStates& oracle, const BackendArenas& backend,
                                          std::int64_t step);
  // The first run of differing bytes of the whole arenas, in arena order.
  std::optional<Difference> first_whole_difference(const OracleStates& oracle,
                                                   const std::vector<model::Arena>& theirs);
  // The same where the backend compares (BackendArenas::compare): only the run's bytes are
  // read back.
  std::optional<Difference> first_whole_difference_compared(const OracleStates& oracle,
                                                            const BackendArenas& backend);
  // `ranges` compared by the backend against what the oracle says they hold; `compared` false
  // (and nothing compared) when either side cannot (then compare the bytes).
  std::optional<Difference> compare_ranges_there(const OracleStates& oracle,
                                                 const BackendArenas& backend,
                                                 std::span<const model::ArenaRange> ranges,
                                                 bool& compared);

  const model::Layout& layout_;
  ArenaComparePolicy policy_;
  bool whole_every_step_ = true;
  std::int64_t steps_since_whole_ = 0;
  std::int64_t last_whole_step_ = -1; // -1: never (the poisoned start)
  bool last_was_whole_ = false;
  std::int64_t bytes_compared_ = 0;
  std::int64_t whole_comparisons_ = 0;
  std::vector<std::byte> ours_;    // the oracle's bytes of the range being compared
  model::ExpectedStates expected_; // what the ranges being compared hold, for the backend
};

} // namespace mc::harness
