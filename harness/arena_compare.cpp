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
  whole_every_step_ = policy.whole_every == 1 || layout.total_bytes() <= policy.whole_bytes_max;
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

namespace {

// The whole arenas are made and compared this many bytes at a time.
constexpr std::int64_t kWholeChunkBytes = std::int64_t{4} << 20;

// The first index where a[0, n) and b[0, n) differ, or n.
std::int64_t first_mismatch(const std::byte* a, const std::byte* b, std::int64_t n) {
  if (std::memcmp(a, b, static_cast<std::size_t>(n)) == 0) return n;
  std::int64_t at = 0;
  while (a[at] == b[at])
    ++at;
  return at;
}

// The end of the run of differing bytes that starts at `at` in arena `arena` (at most `limit`),
// reading both sides a chunk at a time.
std::int64_t run_end(const OracleStates& oracle, const BackendArenas& backend, std::int32_t arena,
                     std::int64_t at, std::int64_t limit, std::vector<std::byte>& ours) {
  std::int64_t end = at;
  while (end < limit) {
    const model::ArenaRange r{
        .arena = arena, .offset_bytes = end, .size_bytes = std::min(kWholeChunkBytes, limit - end)};
    ours.resize(static_cast<std::size_t>(r.size_bytes));
    oracle.read(r, ours);
    const std::span<const std::byte> theirs = backend.read(std::span(&r, 1)).front();
    for (std::size_t k = 0; k < ours.size(); ++k, ++end)
      if (ours[k] == theirs[k]) return end;
  }
  return end;
}

} // namespace

std::optional<Difference>
ArenaComparer::compare_ranges_there(const OracleStates& oracle, const BackendArenas& backend,
                                    std::span<const model::ArenaRange> ranges, bool& compared) {
  compared = false;
  if (!backend.compare || !oracle.describe) return std::nullopt;
  expected_.ranges.clear();
  expected_.rows.clear();
  if (!oracle.describe(ranges, expected_)) return std::nullopt;
  compared = true;
  const std::vector<std::int64_t> first = backend.compare(expected_);
  MC_ASSERT(first.size() == ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const model::ArenaRange& r = ranges[i];
    bytes_compared_ += r.size_bytes;
    if (first[i] < 0) continue;
    const std::int64_t at = r.offset_bytes + first[i];
    return arena_difference(
        layout_, r.arena, at,
        run_end(oracle, backend, r.arena, at, r.offset_bytes + r.size_bytes, ours_));
  }
  return std::nullopt;
}

std::optional<Difference>
ArenaComparer::first_whole_difference_compared(const OracleStates& oracle,
                                               const BackendArenas& backend) {
  expected_.ranges.clear();
  expected_.rows.clear();
  if (!oracle.describe({}, expected_)) return first_whole_difference(oracle, backend.whole());
  const std::vector<std::int64_t> first = backend.compare(expected_);
  MC_ASSERT(first.size() == expected_.ranges.size());
  std::size_t i = 0;
  for (std::size_t a = 0; a < layout_.arenas.size(); ++a) {
    const auto arena = static_cast<std::int32_t>(a);
    const std::int64_t size = layout_.arenas[a].size_bytes();
    bytes_compared_ += size;
    for (; i < first.size() && expected_.ranges[i].range.arena == arena; ++i) {
      if (first[i] < 0) continue;
      const std::int64_t at = expected_.ranges[i].range.offset_bytes + first[i];
      return arena_difference(layout_, arena, at, run_end(oracle, backend, arena, at, size, ours_));
    }
  }
  return std::nullopt;
}

std::optional<Difference>
ArenaComparer::first_whole_difference(const OracleStates& oracle,
                                      const std::vector<model::Arena>& theirs) {
  MC_ASSERT(theirs.size() == layout_.arenas.size());
  for (std::size_t i = 0; i < theirs.size(); ++i) {
    const auto arena = static_cast<std::int32_t>(i);
    const std::int64_t size = layout_.arenas[i].size_bytes();
    MC_ASSERT(theirs[i].size_bytes() == size);
    bytes_compared_ += size;
    const std::byte* them = theirs[i].data();
    // Chunk by chunk until the first differing byte, then on until the run of differences
    // ends.
    std::int64_t at = -1;
    for (std::int64_t off = 0; off < size; off += kWholeChunkBytes) {
      const std::int64_t n = std::min(kWholeChunkBytes, size - off);
      ours_.resize(static_cast<std::size_t>(n));
      oracle.read({.arena = arena, .offset_bytes = off, .size_bytes = n}, ours_);
      const std::int64_t from = at < 0 ? first_mismatch(ours_.data(), them + off, n) : 0;
      if (from == n) continue;
      if (at < 0) at = off + from;
      std::int64_t k = from;
      while (k < n && ours_[static_cast<std::size_t>(k)] != them[off + k])
        ++k;
      if (k < n) return arena_difference(layout_, arena, at, off + k);
    }
    if (at >= 0) return arena_difference(layout_, arena, at, size);
  }
  return std::nullopt;
}

std::optional<Difference> ArenaComparer::compare_whole(const OracleStates& oracle,
                                                       const BackendArenas& backend,
                                                       std::int64_t step) {
  std::optional<Difference> d = backend.compare && oracle.describe
                                    ? first_whole_difference_compared(oracle, backend)
                                    : first_whole_difference(oracle, backend.whole());
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

std::optional<Difference>
ArenaComparer::after_step(const OracleStates& oracle, const BackendArenas& backend,
                          std::span<const oracle::engine::BlockAccess> writes, std::int64_t step) {
  if (whole_every_step_ || ++steps_since_whole_ >= policy_.whole_every)
    return compare_whole(oracle, backend, step);
  last_was_whole_ = false;
  const std::vector<model::ArenaRange> ranges = written_ranges(layout_, writes);
  if (ranges.empty()) return std::nullopt;
  bool compared = false;
  std::optional<Difference> there = compare_ranges_there(oracle, backend, ranges, compared);
  if (compared) return there;
  const std::vector<std::span<const std::byte>> theirs = backend.read(ranges);
  MC_ASSERT(theirs.size() == ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const model::ArenaRange& r = ranges[i];
    ours_.resize(static_cast<std::size_t>(r.size_bytes));
    oracle.read(r, ours_);
    const std::byte* them = theirs[i].data();
    bytes_compared_ += r.size_bytes;
    const std::int64_t at = first_mismatch(ours_.data(), them, r.size_bytes);
    if (at == r.size_bytes) continue;
    std::int64_t end = at;
    while (end < r.size_bytes && ours_[static_cast<std::size_t>(end)] != them[end])
      ++end;
    return arena_difference(layout_, r.arena, r.offset_bytes + at, r.offset_bytes + end);
  }
  return std::nullopt;
}

std::optional<Difference> ArenaComparer::finish(const OracleStates& oracle,
                                                const BackendArenas& backend, std::int64_t step) {
  if (last_was_whole_) return std::nullopt;
  return compare_whole(oracle, backend, step);
}

} // namespace mc::harness
