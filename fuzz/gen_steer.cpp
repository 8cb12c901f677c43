// The kernel-level steer table (gen_steer.h).
#include "fuzz/gen_steer.h"

#include <algorithm>
#include <array>
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

// By feature: the draw column of model/coverage_features.def (none for an engine-only one).
constexpr std::array<GenSteerRow, model::kCoverageFeatureCount> kTable = {
#define MC_GEN_DRAW(...) __VA_ARGS__
#define X(id, name, group, kernel, engine, what, knobs, draw) GenSteerRow{name, MC_GEN_DRAW draw},
#include "model/coverage_features.def"
#undef X
#undef MC_GEN_DRAW
};

// By the draw's name: a function's address is no constant expression in every build (GCC under
// the sanitizers), and every draw is named.
constexpr bool draws_where_kernel() {
  for (const model::CoverageFeature& f : model::kCoverageCatalogue)
    if (kTable[static_cast<std::size_t>(f.id)].draw.empty() == f.kernel) return false;
  return true;
}
static_assert(draws_where_kernel(), "a kernel-level feature needs a draw, another none");

} // namespace

const GenSteerRow* gen_steer_row(model::CoverageFeatureId feature) {
  const GenSteerRow& row = kTable[static_cast<std::size_t>(feature)];
  return row.toward == nullptr ? nullptr : &row;
}

} // namespace mc::fuzz
