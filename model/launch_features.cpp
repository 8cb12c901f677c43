// Row features of one launch (launch_features.h).
#include "model/launch_features.h"

#include "model/errors.h"
#include "model/launch_kinds.h"

#include <algorithm>

namespace mc::model {
namespace {

constexpr std::string_view kRowFeatureNames[kRowFeatureCount] = {
    "copy",        "no-copy",       "same-block-shift", "aliased-columns", "resets-accepted",
    "skipped-row", "null-source",   "pad-slots",        "ds-bias",         "offset-past-4GiB",
    "shared-page", "slot-table-row"};

RowFeatureMask bit(RowFeature f) {
  return RowFeatureMask{1} << static_cast<unsigned>(f);
}

std::int32_t entry(const std::vector<std::int32_t>& v, std::int32_t i) {
  return i >= 0 && static_cast<std::size_t>(i) < v.size() ? v[static_cast<std::size_t>(i)] : 0;
}

bool v1_kind(LaunchKind kind) {
  return !uses_idx_mapping(kind);
}

// The column a copy reads: the conv window sits at the source column with a token offset; the
// temporal state is spread over the window, the bias selects the column (REFERENCE.md 2).
std::int32_t read_col(const StateTensor& t, const CopyDecision& d) {
  return t.kind() == StateKind::conv ? d.src_col : d.src_col + d.token_bias;
}

RowFeatureMask decision_features(const Layout& layout, const std::vector<bool>& shares_page,
                                 const CopyDecision& d) {
  const StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
  const std::int64_t page = layout.arenas[static_cast<std::size_t>(t.arena)].page_bytes;
  RowFeatureMask m = bit(RowFeature::copy);
  if (d.src_block_id == d.dst_block_id) {
    m |= bit(RowFeature::same_block_shift);
    if (read_col(t, d) != d.dst_col) m |= bit(RowFeature::aliased_columns);
  }
  if (t.kind() == StateKind::conv && t.conv_layout == ConvLayout::DS && d.token_bias > 0)
    m |= bit(RowFeature::ds_bias);
  if (d.src_block_id == kNullBlockId) m |= bit(RowFeature::null_source);
  constexpr std::int64_t k4GiB = std::int64_t{1} << 32;
  if (std::int64_t{std::max(d.src_block_id, d.dst_block_id)} * page + page > k4GiB)
    m |= bit(RowFeature::offset_past_4GiB);
  if (shares_page[static_cast<std::size_t>(d.tensor)]) m |= bit(RowFeature::shared_page);
  return m;
}

bool row_has_pad(const BlockTables& tables, std::int32_t b) {
  for (const BlockTable& t : tables.groups) {
    if (b >= t.num_rows) continue;
    for (std::int32_t c = 0; c < t.row_width; ++c)
      if (t.at(b, c) == kPadSlot) return true;
  }
  return false;
}

// V1's postprocess family writes the reset to num_accepted_out; the V2 kinds reset num_accepted
// in place.
bool resets_accepted(LaunchKind kind, const RequestArrays& before, const RequestArrays& after,
                     std::int32_t slot) {
  const std::int32_t a_before = entry(before.num_accepted, slot);
  if (launch_kind_info(kind).family == LaunchFamily::postprocess)
    return !after.num_accepted_out.empty() && entry(after.num_accepted_out, slot) != a_before;
  return entry(after.num_accepted, slot) != a_before;
}

} // namespace

std::string_view to_string(RowFeature feature) {
  const auto i = static_cast<std::size_t>(feature);
  MC_ASSERT(i < kRowFeatureCount);
  return kRowFeatureNames[i];
}

bool tensor_shares_page(const Layout& layout, std::int32_t tensor) {
  const std::int32_t arena = layout.tensors[static_cast<std::size_t>(tensor)].arena;
  return std::count_if(layout.tensors.begin(), layout.tensors.end(),
                       [arena](const StateTensor& t) { return t.arena == arena; }) > 1;
}

std::int32_t slot_of_row(LaunchKind kind, const RequestArrays& arrays, std::int32_t b) {
  if (v1_kind(kind)) return b;
  const std::vector<std::int32_t>& map = arrays.idx_mapping;
  return static_cast<std::size_t>(b) < map.size() ? map[static_cast<std::size_t>(b)] : -1;
}

std::vector<RowFeatureMask> row_features(const LaunchFacts& launch) {
  MC_ASSERT(launch.layout != nullptr && launch.after != nullptr);
  MC_ASSERT(launch.num_reqs >= 0);
  const Layout& layout = *launch.layout;
  std::vector<bool> shares_page(layout.tensors.size());
  for (std::size_t t = 0; t < layout.tensors.size(); ++t)
    shares_page[t] = tensor_shares_page(layout, static_cast<std::int32_t>(t));
  std::vector<RowFeatureMask> rows(static_cast<std::size_t>(launch.num_reqs), 0);
  for (const CopyDecision& d : launch.decisions) {
    MC_ASSERT(d.batch_row >= 0 && d.batch_row < launch.num_reqs);
    rows[static_cast<std::size_t>(d.batch_row)] |= decision_features(layout, shares_page, d);
  }
  for (std::int32_t b = 0; b < launch.num_reqs; ++b) {
    RowFeatureMask& m = rows[static_cast<std::size_t>(b)];
    if (!has(m, RowFeature::copy)) m |= bit(RowFeature::no_copy);
    const std::int32_t slot = slot_of_row(launch.kind, *launch.after, b);
    if (slot < 0) {
      m |= bit(RowFeature::skipped_row);
      continue;
    }
    // Only a copying row reads its table: there the two conventions read different rows.
    if (tables_by_slot(launch.kind) && slot != b && has(m, RowFeature::copy))
      m |= bit(RowFeature::slot_table_row);
    if (launch.before && resets_accepted(launch.kind, *launch.before, *launch.after, slot))
      m |= bit(RowFeature::resets_accepted);
    if (launch.tables && row_has_pad(*launch.tables, b)) m |= bit(RowFeature::pad_slots);
  }
  return rows;
}

} // namespace mc::model
