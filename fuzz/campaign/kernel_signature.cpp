#include "fuzz/campaign/kernel_signature.h"

#include "model/errors.h"
#include "model/launch_features.h"
#include "model/request_arrays.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::fuzz {
namespace {

std::optional<std::int32_t> row_of_slot(const model::LaunchCase& launch, std::int32_t slot) {
  for (std::int32_t b = 0; b < launch.num_reqs; ++b)
    if (model::slot_of_row(launch.kind, launch.requests, b) == slot) return b;
  return std::nullopt;
}

const model::RequestArrayField* array_named(std::string_view name) {
  for (const model::RequestArrayField& f : model::kRequestArrays)
    if (f.name == name) return &f;
  return nullptr;
}

// What the oracle's decisions and arrays say about batch row b. A signature names the row by
// the features it has always named; aliasing, pad slots and the page of every copied state
// are coverage's (shared-page is added below for the differing tensor only).
std::vector<std::string> signature_features(const model::LaunchCase& launch,
                                            const model::LaunchResult& oracle, std::int32_t b) {
  const std::vector<model::RowFeatureMask> rows =
      model::row_features({.layout = &launch.layout,
                           .kind = launch.kind,
                           .num_reqs = launch.num_reqs,
                           .before = &launch.requests,
                           .after = &oracle.requests,
                           .decisions = oracle.decisions});
  std::vector<std::string> out;
  for (const model::RowFeature f :
       {model::RowFeature::skipped_row, model::RowFeature::same_block_shift,
        model::RowFeature::ds_bias, model::RowFeature::null_source,
        model::RowFeature::offset_past_4GiB, model::RowFeature::copy, model::RowFeature::no_copy,
        model::RowFeature::resets_accepted})
    if (model::has(rows[static_cast<std::size_t>(b)], f)) out.emplace_back(model::to_string(f));
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
  case DifferenceCategory::decisions:
    s.difference = to_string(d.category);
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
  if (row) s.features = signature_features(launch, outcome.oracle, *row);
  if (d.category == DifferenceCategory::arena && d.arena_location &&
      d.arena_location->tensor >= 0 &&
      model::tensor_shares_page(launch.layout, d.arena_location->tensor))
    s.features.emplace_back("shared-page");
  std::sort(s.features.begin(), s.features.end());
  s.shape = shape_of(s.features);
  return s;
}

} // namespace mc::fuzz
