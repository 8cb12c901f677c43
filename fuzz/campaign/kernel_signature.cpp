#include "fuzz/campaign/kernel_signature.h"

#include "model/errors.h"
#include "model/request_arrays.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::fuzz {
namespace {

bool v1_kind(model::LaunchKind kind) {
  return kind == model::LaunchKind::postprocess || kind == model::LaunchKind::batch_copy;
}

// The slot of batch row b, or -1 (a skipped V2 row, or no idx_mapping).
std::int32_t slot_of(const model::LaunchCase& launch, std::int32_t b) {
  if (v1_kind(launch.kind)) return b;
  const std::vector<std::int32_t>& map = launch.requests.idx_mapping;
  return static_cast<std::size_t>(b) < map.size() ? map[static_cast<std::size_t>(b)] : -1;
}

std::optional<std::int32_t> row_of_slot(const model::LaunchCase& launch, std::int32_t slot) {
  for (std::int32_t b = 0; b < launch.num_reqs; ++b)
    if (slot_of(launch, b) == slot) return b;
  return std::nullopt;
}

const model::RequestArrayField* array_named(std::string_view name) {
  for (const model::RequestArrayField& f : model::kRequestArrays)
    if (f.name == name) return &f;
  return nullptr;
}

bool tensor_shares_page(const model::Layout& layout, std::int32_t tensor) {
  const std::int32_t arena = layout.tensors[static_cast<std::size_t>(tensor)].arena;
  return std::count_if(layout.tensors.begin(), layout.tensors.end(),
                       [arena](const model::StateTensor& t) { return t.arena == arena; }) > 1;
}

std::int32_t entry(const std::vector<std::int32_t>& v, std::int32_t i) {
  return i >= 0 && static_cast<std::size_t>(i) < v.size() ? v[static_cast<std::size_t>(i)] : 0;
}

// What the oracle's decisions and arrays say about batch row b, in a fixed order.
std::vector<std::string> row_features(const model::LaunchCase& launch,
                                      const model::LaunchResult& oracle, std::int32_t b) {
  std::vector<std::string> out;
  const auto add = [&out](const char* feature) {
    if (std::find(out.begin(), out.end(), feature) == out.end()) out.emplace_back(feature);
  };
  const std::int32_t slot = slot_of(launch, b);
  if (!v1_kind(launch.kind) && slot < 0) add("skipped-row");
  bool copies = false;
  for (const model::CopyDecision& d : oracle.decisions) {
    if (d.batch_row != b) continue;
    copies = true;
    const model::StateTensor& t = launch.layout.tensors[static_cast<std::size_t>(d.tensor)];
    const std::int64_t page = launch.layout.arenas[static_cast<std::size_t>(t.arena)].page_bytes;
    // One block read and written: a shift inside it (a same-column save with a bias, or two
    // columns that alias one block).
    if (d.src_block_id == d.dst_block_id) add("same-block-shift");
    if (t.kind() == model::StateKind::conv && t.conv_layout == model::ConvLayout::DS &&
        d.token_bias > 0)
      add("ds-bias");
    if (d.src_block_id == 0) add("null-source");
    constexpr std::int64_t k4GiB = std::int64_t{1} << 32;
    if (std::max(d.src_block_id, d.dst_block_id) * page + page > k4GiB) add("offset-past-4GiB");
  }
  add(copies ? "copy" : "no-copy");
  if (slot >= 0 &&
      entry(oracle.requests.num_accepted, slot) != entry(launch.requests.num_accepted, slot))
    add("resets-accepted");
  return out;
}

} // namespace

std::optional<std::int32_t> failing_row(const model::LaunchCase& launch,
                                        const model::LaunchResult& oracle,
                                        const Difference& difference) {
  switch (difference.category) {
  case DifferenceCategory::status:
    return std::nullopt;
  case DifferenceCategory::decisions:
    if (difference.batch_row >= 0) return difference.batch_row;
    return std::nullopt;
  case DifferenceCategory::requests: {
    const model::RequestArrayField* field = array_named(difference.array);
    if (field == nullptr || difference.index < 0) return std::nullopt;
    switch (field->indexing) {
    case model::ArrayIndexing::by_slot:
      return row_of_slot(launch, difference.index);
    case model::ArrayIndexing::by_batch_row:
      return difference.index < launch.num_reqs ? std::optional(difference.index) : std::nullopt;
    case model::ArrayIndexing::by_row_boundary:
      return std::min(difference.index, launch.num_reqs - 1);
    }
    return std::nullopt;
  }
  case DifferenceCategory::arena: {
    if (!difference.arena_location || difference.arena_location->tensor < 0) return std::nullopt;
    const ArenaLocation& loc = *difference.arena_location;
    for (const model::CopyDecision& d : oracle.decisions)
      if (d.tensor == loc.tensor && d.dst_block_id == loc.block_id) return d.batch_row;
    return std::nullopt;
  }
  }
  return std::nullopt;
}

std::vector<std::string> differing_pairs(const model::LaunchCase& launch,
                                         const model::LaunchResult& expected,
                                         const model::LaunchResult& actual,
                                         std::size_t max_lines) {
  std::vector<std::string> lines;
  std::size_t more = 0;
  const auto add = [&](std::string line) {
    if (lines.size() < max_lines)
      lines.push_back(std::move(line));
    else
      ++more;
  };
  for (const model::CopyDecision& d : expected.decisions) {
    const model::StateTensor& t = launch.layout.tensors[static_cast<std::size_t>(d.tensor)];
    const auto arena = static_cast<std::size_t>(t.arena);
    if (arena >= expected.arenas.size() || arena >= actual.arenas.size()) continue;
    const std::int64_t begin = t.block_offset_bytes(d.dst_block_id);
    const std::int64_t end = begin + t.natural_bytes;
    if (begin < 0 || end > expected.arenas[arena].size_bytes() ||
        end > actual.arenas[arena].size_bytes())
      continue;
    const std::byte* e = expected.arenas[arena].data();
    const std::byte* a = actual.arenas[arena].data();
    std::int64_t first = -1, count = 0;
    for (std::int64_t i = begin; i < end; ++i)
      if (e[i] != a[i]) {
        if (first < 0) first = i - begin;
        ++count;
      }
    if (count == 0) continue;
    add(fmt::format("row {} (slot {}), group {} layer {} {}, block {}: {} of {} bytes differ, "
                    "from byte {}",
                    d.batch_row, d.slot, d.group, d.layer, t.shape.name, d.dst_block_id, count,
                    t.natural_bytes, first));
  }
  for (const model::RequestArrayField& f : model::kRequestArrays) {
    const std::vector<std::int32_t>& e = expected.requests.*f.member;
    const std::vector<std::int32_t>& a = actual.requests.*f.member;
    for (std::size_t i = 0; i < std::min(e.size(), a.size()); ++i)
      if (e[i] != a[i]) add(fmt::format("{}[{}]: expected {}, actual {}", f.name, i, e[i], a[i]));
  }
  if (more > 0) lines.push_back(fmt::format("... and {} more", more));
  return lines;
}

Signature kernel_signature(const model::LaunchCase& launch, const CaseOutcome& outcome) {
  MC_ASSERT(outcome.failed());
  Signature s{.level = "kernel", .kind = std::string(model::to_string(launch.kind))};
  switch (outcome.status) {
  case CaseStatus::held:
    MC_ASSERT(false);
    break;
  case CaseStatus::oracle_rejected:
    s.difference = "oracle-rejected";
    return s;
  case CaseStatus::backend_failed:
    s.difference = "backend-error";
    s.classification = Classification::backend_error;
    return s;
  case CaseStatus::mismatch:
    break;
  }
  const Difference& d = *outcome.difference;
  const std::optional<std::int32_t> row = failing_row(launch, outcome.oracle, d);
  switch (d.category) {
  case DifferenceCategory::status:
    s.difference = "status";
    break;
  case DifferenceCategory::decisions:
    s.difference = "decisions";
    break;
  case DifferenceCategory::requests:
    s.difference = "request-array-" + d.array;
    break;
  case DifferenceCategory::arena:
    if (d.arena_location && d.arena_location->in_padding)
      s.difference = "page-padding";
    else
      s.difference = row ? "state-bytes" : "stray-write";
    break;
  }
  if (row) s.features = row_features(launch, outcome.oracle, *row);
  if (d.category == DifferenceCategory::arena && d.arena_location &&
      d.arena_location->tensor >= 0 && tensor_shares_page(launch.layout, d.arena_location->tensor))
    s.features.emplace_back("shared-page");
  std::sort(s.features.begin(), s.features.end());
  s.shape = shape_of(s.features);
  return s;
}

} // namespace mc::fuzz
