// The kernel-level steer table (gen_steer.h).
#include "fuzz/gen_steer.h"

#include "model/launch_kinds.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace mc::fuzz {
namespace {

using model::LaunchKind;

// The campaign's kinds (empty: every kind) that `able` accepts; the campaign's own when none
// does (the feature is then out of its reach, and a narrower draw would launch kinds the
// campaign's kernels may not have).
std::vector<LaunchKind> narrowed(const std::vector<LaunchKind>& campaign,
                                 bool (*able)(LaunchKind)) {
  std::vector<LaunchKind> out;
  for (const LaunchKind k : model::kAllLaunchKinds)
    if (able(k) && (campaign.empty() || std::ranges::find(campaign, k) != campaign.end()))
      out.push_back(k);
  return out.empty() ? campaign : out;
}

template <LaunchKind K> GenOptions only_kind(GenOptions o) {
  o.kinds = narrowed(o.kinds, [](LaunchKind k) { return k == K; });
  return o;
}

// Rows that copy, most of them across columns (what aliasing and null sources act on).
SaveRowWeights copies() {
  return {.no_copy = 0, .copy = 80, .same_column = 10, .same_column_shift = 10};
}

GenOptions all_copy(GenOptions o) {
  o.save_rows = copies();
  return o;
}

GenOptions no_copy(GenOptions o) {
  o.save_rows = {.no_copy = 1, .copy = 0, .same_column = 0, .same_column_shift = 0};
  return o;
}

// A same-column save with a token bias (drafts needed), or a destination aliasing the source.
GenOptions same_block(GenOptions o) {
  o.save_rows = {.no_copy = 0, .copy = 20, .same_column = 30, .same_column_shift = 50};
  o.tables.alias_conv = 50;
  o.num_spec_min = 1;
  return o;
}

GenOptions aliased(GenOptions o) {
  o.save_rows = copies();
  o.tables = {.plain = 10,
              .alias_conv = 45,
              .alias_temporal = 45,
              .null_read = 0,
              .shared_read = 0,
              .prefix_dup = 0};
  return o;
}

// num_accepted becomes 1 on a same-column save.
GenOptions resets(GenOptions o) {
  o.save_rows = {.no_copy = 10, .copy = 10, .same_column = 50, .same_column_shift = 30};
  o.num_spec_min = 1;
  return o;
}

// idx_mapping holes come only with the V2 kinds.
GenOptions v2_rows(GenOptions o) {
  o.kinds = narrowed(o.kinds, model::uses_idx_mapping);
  return o;
}

GenOptions null_reads(GenOptions o) {
  o.save_rows = copies();
  o.tables = {.plain = 10,
              .alias_conv = 0,
              .alias_temporal = 0,
              .null_read = 90,
              .shared_read = 0,
              .prefix_dup = 0};
  return o;
}

// A bias on a copy needs drafts; the DS layout is drawn in 2 cases of 5.
GenOptions biased_copies(GenOptions o) {
  o.save_rows = copies();
  o.num_spec_min = 2;
  return o;
}

// The pads after a row's last used column, and page sharing, come with most draws at any size.
GenOptions as_drawn(GenOptions o) {
  return o;
}

// The big-offsets preset's classes, the campaign's kinds kept.
GenOptions big_offsets(GenOptions o) {
  o.weights = GenOptions::big_offsets().weights;
  return o;
}

GenOptions slot_rows(GenOptions o) {
  o.kinds = narrowed(o.kinds, model::tables_by_slot);
  o.save_rows = copies();
  return o;
}

// Text joined at compile time around a kind's name: the feature and draw of its row.
template <std::size_t I, const std::string_view& Before, const std::string_view& After>
struct KindText {
  static constexpr std::string_view name = model::kLaunchKinds[I].name;
  static constexpr auto chars = [] {
    std::array<char, Before.size() + name.size() + After.size()> out{};
    std::size_t n = 0;
    for (const std::string_view part : {Before, name, After})
      for (const char c : part)
        out[n++] = c;
    return out;
  }();
  static constexpr std::string_view text{chars.data(), chars.size()};
};
constexpr std::string_view kNoText;
constexpr std::string_view kLaunchFeature = "launch-"; // model/coverage.h names them so
constexpr std::string_view kOnly = " only";

// The launch-KIND feature of every kind, in the table's order (the catalogue's).
template <std::size_t... I> constexpr auto kind_rows(std::index_sequence<I...> /*kinds*/) {
  return std::array{GenSteerRow{KindText<I, kLaunchFeature, kNoText>::text,
                                KindText<I, kNoText, kOnly>::text,
                                only_kind<model::kLaunchKinds[I].kind>}...};
}

constexpr std::array kRowFeatureRows = {
    GenSteerRow{"copy", "rows that copy", all_copy},
    GenSteerRow{"no-copy", "rows that copy nothing", no_copy},
    GenSteerRow{"same-block-shift", "same-column saves with drafts, aliased tables", same_block},
    GenSteerRow{"aliased-columns", "aliased tables", aliased},
    GenSteerRow{"resets-accepted", "same-column saves with drafts", resets},
    GenSteerRow{"skipped-row", "the V2 kinds", v2_rows},
    GenSteerRow{"null-source", "null-block sources", null_reads},
    GenSteerRow{"pad-slots", "the campaign's own", as_drawn},
    GenSteerRow{"ds-bias", "copies with two drafts or more", biased_copies},
    GenSteerRow{"offset-past-4GiB", "big-offsets", big_offsets},
    GenSteerRow{"shared-page", "the campaign's own", as_drawn},
    GenSteerRow{"slot-table-row", "the per-slot table kinds, rows that copy", slot_rows},
};

template <std::size_t N, std::size_t M>
constexpr std::array<GenSteerRow, N + M> joined(const std::array<GenSteerRow, N>& a,
                                                const std::array<GenSteerRow, M>& b) {
  std::array<GenSteerRow, N + M> out{};
  std::ranges::copy(a, out.begin());
  std::ranges::copy(b, out.begin() + N);
  return out;
}

constexpr auto kTable =
    joined(kind_rows(std::make_index_sequence<model::kLaunchKinds.size()>{}), kRowFeatureRows);

} // namespace

std::span<const GenSteerRow> gen_steer_table() {
  return kTable;
}

const GenSteerRow* find_gen_steer_row(std::string_view feature) {
  const auto* row = std::ranges::find(kTable, feature, &GenSteerRow::feature);
  return row == kTable.end() ? nullptr : row;
}

} // namespace mc::fuzz
