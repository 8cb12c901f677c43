// --whole-compare-every, shared by the engine commands that compare arenas after each step
// (run, replay, scenario): how often every arena byte is compared once the arenas are too
// large to compare whole after every step (harness/arena_compare.h).
#pragma once

#include "harness/arena_compare.h"
#include "model/errors.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>

namespace mc::cli {

inline void add_whole_compare_option(CLI::App& cmd, std::optional<std::int64_t>& every) {
  cmd.add_option("--whole-compare-every", every,
                 "Past 64 MiB of arenas, compare the blocks each step wrote and every arena byte "
                 "every N steps and after the last (default 64; 1: every byte after every step)");
}

// Not given: the default.
inline harness::ArenaComparePolicy arena_compare_policy(std::optional<std::int64_t> every) {
  harness::ArenaComparePolicy policy;
  if (!every) return policy;
  if (*every < 1) model::fail_input("--whole-compare-every must be at least 1, got {}", *every);
  policy.whole_every = *every;
  return policy;
}

} // namespace mc::cli
