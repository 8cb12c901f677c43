// The lockstep loop's arena comparison (arena_compare.h).
#include "harness/arena_compare.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace mc::harness {

std::string ArenaCoverage::text() const {
  if (whole_every_step) return "whole arenas after every step";
  return fmt::format("the blocks each step wrote, whole arenas every {} steps and after the last "
                     "({} times)",
                     whole_every, whole_comparisons);
}

ArenaComparer::ArenaComparer(const model::Layout& layout, ArenaComparePolicy policy)
    : layout_(layout), policy_(policy) {
  if (policy.whole_every < 1)
    throw model::InputError(fmt::format(
        "the whole arenas must be compared every N >= 1 steps, got {}", policy.whole_every));
  std::int64_t total = 0;
  for (const model::ArenaSpec& a : layout.arenas)
    total += a.size_bytes();
  whole_every_step_ = policy.whole_every == 1 || total <= policy.whole_bytes_max;
}

std::vector<model::ArenaRange> ArenaComparer::written_ranges(
    const model::Layout& layout, std::span<const oracle::engine::BlockAccess> writes) {
  std::vector<model::ArenaRange> ranges;
  ranges.reserve(writes.size());
  for (const oracle::engine::BlockAccess& w : writes) {
    if (w.tensor < 0 || w.tensor >= static_cast<std::int32_t>(layout.tensors.size())) continue;
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(w.tensor)];
    if (w.block_id < 0 || w.block_id >= layout.spec.num_blocks) continue;
    ranges.push_back({.arena = t.arena,
                      .offset_bytes = t.block_offset_bytes(w.block_id),
                      .size_bytes = t.natural_bytes});
  }
  std::ranges::sort(ranges, [](const model::ArenaRange& a, const model::ArenaRange& b) {
    return a.arena != b.arena ? a.arena < b.arena : a.offset_bytes < b.offset_bytes;
  });
  const auto same = [](const model::ArenaRange& a, const model::ArenaRange& b) {
    return a.arena == b.arena && a.offset_bytes == b.offset_bytes;
  };
  ranges.erase(std::unique(ranges.begin(), ranges.end(), same), ranges.end());
  return ranges;
}

std::optional<Difference> ArenaComparer::compare_whole(const std::vector<model::Arena>& oracle,
                                                       const BackendArenas& backend,
                                                       std::int64_t step) {
  std::optional<Difference> d =
      difference_of_arenas(layout_, oracle, backend.whole(), bytes_compared_);
  ++whole_comparisons_;
  if (d && !whole_every_step_)
    d->text += last_whole_step_ < 0
                   ? fmt::format(" (found when the whole arenas were compared after step {}; "
                                 "they had not been compared whole before, and each step "
                                 "compared only the blocks it wrote)",
                                 step)
                   : fmt::format(" (found when the whole arenas were compared after step {}; "
                                 "they last matched whole after step {}, and each step since "
                                 "compared only the blocks it wrote)",
                                 step, last_whole_step_);
  last_whole_step_ = step;
  steps_since_whole_ = 0;
  last_was_whole_ = true;
  return d;
}

std::optional<Difference> ArenaComparer::after_step(
    const std::vector<model::Arena>& oracle, const BackendArenas& backend,
    std::span<const oracle::engine::BlockAccess> writes, std::int64_t step) {
  if (whole_every_step_ || ++steps_since_whole_ >= policy_.whole_every)
    return compare_whole(oracle, backend, step);
  last_was_whole_ = false;
  const std::vector<model::ArenaRange> ranges = written_ranges(layout_, writes);
  if (ranges.empty()) return std::nullopt;
  const std::vector<std::span<const std::byte>> theirs = backend.read(ranges);
  MC_ASSERT(theirs.size() == ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const model::ArenaRange& r = ranges[i];
    const std::byte* ours = oracle[static_cast<std::size_t>(r.arena)].data() + r.offset_bytes;
    const std::byte* them = theirs[i].data();
    const auto n = static_cast<std::size_t>(r.size_bytes);
    bytes_compared_ += r.size_bytes;
    if (std::memcmp(ours, them, n) == 0) continue;
    std::size_t at = 0;
    while (ours[at] == them[at])
      ++at;
    std::size_t end = at;
    while (end < n && ours[end] != them[end])
      ++end;
    return arena_difference(layout_, r.arena, r.offset_bytes + static_cast<std::int64_t>(at),
                            r.offset_bytes + static_cast<std::int64_t>(end));
  }
  return std::nullopt;
}

std::optional<Difference> ArenaComparer::finish(const std::vector<model::Arena>& oracle,
                                                const BackendArenas& backend,
                                                std::int64_t step) {
  if (last_was_whole_) return std::nullopt;
  return compare_whole(oracle, backend, step);
}

} // namespace mc::harness
