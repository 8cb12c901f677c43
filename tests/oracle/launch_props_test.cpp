// Algebraic facts of the oracle, checked with RapidCheck on small random valid cases.
//
// The generators here are deliberately simple (fuzz/ has the real ones): a tiny preset, a
// table row of private blocks per request (per slot where a kind finds its table by slot;
// aliasing inside a row, never across rows, so copies of different requests never race),
// poisoned arenas, and per-kind arrays drawn so that every column read stays in its row.
#include "in_place_check.h"
#include "oracle/launch.h"
#include "oracle_test_util.h"

#include "model/errors.h"
#include "model/launch_kinds.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

namespace mc::oracle {
namespace {

using model::LaunchFamily;
using model::LaunchKind;

constexpr std::int32_t kRowWidth = 8;
constexpr std::int32_t kBlocksPerRow = 6; // private pool of each row: 5 rows x 6 < 32 blocks

// Uniform over the whole range at every size (inRange alone scales with the size, which
// would make the first hundred cases mostly minimal); shrinking still goes towards `lo`.
std::int32_t draw(std::int32_t lo, std::int32_t hi_inclusive) {
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange(lo, hi_inclusive + 1));
}

std::vector<std::int32_t> draws(std::size_t n, std::int32_t lo, std::int32_t hi_inclusive) {
  std::vector<std::int32_t> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(draw(lo, hi_inclusive));
  return out;
}

model::Layout arbitrary_layout() {
  const std::string name =
      *rc::gen::element<std::string>("tiny-mamba2", "tiny-mamba1", "tiny-gdn", "tiny-kda",
                                     "tiny-short-conv", "tiny-linear", "tiny-mixed");
  const auto conv_layout = *rc::gen::element(model::ConvLayout::SD, model::ConvLayout::DS);
  return test_util::preset_layout(name, conv_layout);
}

// idx_mapping: distinct slots, some rows skipped (-1).
std::vector<std::int32_t> arbitrary_idx_mapping(std::int32_t num_reqs, std::int32_t num_slots) {
  std::vector<std::int32_t> slots(static_cast<std::size_t>(num_slots));
  std::iota(slots.begin(), slots.end(), 0);
  for (std::size_t i = slots.size(); i > 1; --i)
    std::swap(slots[i - 1],
              slots[static_cast<std::size_t>(draw(0, static_cast<std::int32_t>(i) - 1))]);
  slots.resize(static_cast<std::size_t>(num_reqs));
  for (std::int32_t& s : slots)
    if (draw(0, 4) == 0) s = -1;
  return slots;
}

void fill_arrays(model::LaunchCase& c) {
  const auto n = static_cast<std::size_t>(c.num_slots);
  model::RequestArrays& r = c.requests;
  const std::int32_t bias_max = 2; // temporal reads column src + bias: src <= width - 3
  switch (model::launch_kind_info(c.kind).family) {
  case LaunchFamily::postprocess:
    r.num_accepted = draws(n, 1, 3);
    r.state_idx = draws(n, 0, kRowWidth - 1 - bias_max);
    r.num_draft = draws(n, 0, 2);
    for (std::size_t i = 0; i < n; ++i)
      r.num_scheduled.push_back(r.num_draft[i] + draw(1, 4));
    r.num_computed = draws(n, 0, 12); // dst column <= (12 + 6 + 2) / 4 - 1 = 4
    return;
  case LaunchFamily::postprocess_align:
    r.num_accepted = draws(n, 1, 3);
    r.state_idx = draws(n, 0, kRowWidth - 1 - bias_max);
    for (std::size_t i = 0; i < n; ++i)
      r.new_num_computed.push_back(r.num_accepted[i] + draw(0, 20));
    return;
  case LaunchFamily::precopy:
    r.state_idx = draws(n, 0, kRowWidth - 1); // the destination of any copy
    r.src_col = draws(n, -1, kRowWidth - 1 - bias_max);
    r.token_bias = draws(n, 0, bias_max);
    return;
  case LaunchFamily::preprocess_align:
    r.state_idx = draws(n, -1, 6);
    r.num_computed = draws(n, 0, 20);
    r.num_accepted = draws(n, 0, 3);
    r.src_col = draws(n, -1, 6);
    r.token_bias = draws(n, 0, 3);
    r.query_start_loc.push_back(0);
    for (std::int32_t b = 0; b < c.num_reqs; ++b)
      r.query_start_loc.push_back(r.query_start_loc.back() + draw(0, 5));
    return;
  }
}

model::LaunchCase arbitrary_case(LaunchKind kind) {
  const std::int32_t num_reqs = draw(0, 4) == 0 ? 0 : draw(1, 4);
  // Per-slot tables have a row per slot: at most 5 private rows fit the tiny pools.
  const std::int32_t free_slots_max = model::tables_by_slot(kind) ? 1 : 2;
  const std::int32_t num_slots =
      model::uses_idx_mapping(kind) ? num_reqs + draw(0, free_slots_max) : num_reqs;
  model::LaunchCase c = test_util::make_case(arbitrary_layout(), kind, num_reqs, num_slots,
                                             kRowWidth, kRowWidth + draw(0, 3));
  const std::int32_t table_rows = model::tables_by_slot(kind) ? num_slots : num_reqs;
  if (model::tables_by_slot(kind))
    for (model::BlockTable& t : c.block_tables.groups)
      t = model::BlockTable::make(table_rows, t.row_width, t.row_stride);
  for (std::int32_t g = 0; g < c.layout.num_groups(); ++g)
    for (std::int32_t row = 0; row < table_rows; ++row)
      test_util::set_row(
          c, g, row,
          draws(kRowWidth, 1 + row * kBlocksPerRow, kBlocksPerRow + row * kBlocksPerRow));
  if (model::uses_idx_mapping(kind))
    c.requests.idx_mapping = arbitrary_idx_mapping(num_reqs, num_slots);
  fill_arrays(c);
  return c;
}

LaunchKind arbitrary_kind() {
  return *rc::gen::elementOf(std::vector<LaunchKind>(std::begin(model::kAllLaunchKinds),
                                                     std::end(model::kAllLaunchKinds)));
}

LaunchFamily family_of(LaunchKind kind) {
  return model::launch_kind_info(kind).family;
}

bool is_postprocess(LaunchKind kind) {
  return model::launch_kind_info(kind).phase == model::LaunchPhase::post_step;
}

// Byte mask of every destination range of the decisions, per arena (computed here from the
// layout, independently of the oracle's views).
std::vector<std::vector<bool>> destination_mask(const model::LaunchCase& c,
                                                const model::LaunchResult& r) {
  std::vector<std::vector<bool>> mask;
  for (const model::Arena& a : c.arenas)
    mask.emplace_back(static_cast<std::size_t>(a.size_bytes()), false);
  for (const model::CopyDecision& d : r.decisions) {
    const model::StateTensor& t = test_util::tensor_of(c.layout, d.tensor);
    std::vector<bool>& m = mask[static_cast<std::size_t>(t.arena)];
    const std::int64_t block = t.block_offset_bytes(d.dst_block_id);
    const bool ds = t.kind() == model::StateKind::conv && t.conv_layout == model::ConvLayout::DS;
    const std::int64_t rows = ds ? t.shape.conv_dim : 1;
    const std::int64_t row_stride = ds ? t.shape.conv_state_len * t.elem_size : 0;
    for (std::int64_t row = 0; row < rows; ++row)
      for (std::int64_t i = 0; i < d.bytes / rows; ++i)
        m[static_cast<std::size_t>(block + row * row_stride + i)] = true;
  }
  return mask;
}

// Every destination holds its source slice as it was before the launch (bytes, by hand).
void check_destinations_hold_sources(const model::LaunchCase& c, const model::LaunchResult& r) {
  for (const model::CopyDecision& d : r.decisions) {
    const model::StateTensor& t = test_util::tensor_of(c.layout, d.tensor);
    const model::Arena& before = c.arenas[static_cast<std::size_t>(t.arena)];
    const model::Arena& after = r.arenas[static_cast<std::size_t>(t.arena)];
    const bool ds = t.kind() == model::StateKind::conv && t.conv_layout == model::ConvLayout::DS;
    const std::int64_t rows = ds ? t.shape.conv_dim : 1;
    const std::int64_t row_stride = ds ? t.shape.conv_state_len * t.elem_size : 0;
    const std::int64_t src = t.block_offset_bytes(d.src_block_id) + d.src_byte_offset;
    const std::int64_t dst = t.block_offset_bytes(d.dst_block_id);
    for (std::int64_t row = 0; row < rows; ++row)
      for (std::int64_t i = 0; i < d.bytes / rows; ++i)
        RC_ASSERT(after.data()[dst + row * row_stride + i] ==
                  before.data()[src + row * row_stride + i]);
  }
}

RC_GTEST_PROP(OracleProps, BytesOutsideEveryDestinationNeverChange, ()) {
  const model::LaunchCase c = arbitrary_case(arbitrary_kind());
  const model::LaunchResult r = test_util::run_launch_checked(c);
  RC_TAG(std::string(model::to_string(c.kind)), r.decisions.empty() ? "no copy" : "copies");
  const auto mask = destination_mask(c, r);
  for (std::size_t a = 0; a < c.arenas.size(); ++a)
    for (std::int64_t off = 0; off < c.arenas[a].size_bytes(); ++off)
      if (!mask[a][static_cast<std::size_t>(off)])
        RC_ASSERT(c.arenas[a].data()[off] == r.arenas[a].data()[off]);
  check_destinations_hold_sources(c, r);
  RC_ASSERT(std::is_sorted(r.decisions.begin(), r.decisions.end(),
                           [](const model::CopyDecision& x, const model::CopyDecision& y) {
                             return std::tie(x.batch_row, x.tensor) <
                                    std::tie(y.batch_row, y.tensor);
                           }));
}

// Only the kind's outputs may differ from the inputs.
model::RequestArrays with_outputs_of(const model::RequestArrays& in,
                                     const model::RequestArrays& out, LaunchKind kind) {
  model::RequestArrays expected = in;
  switch (family_of(kind)) {
  case LaunchFamily::postprocess:
    expected.num_accepted_out = out.num_accepted_out;
    break;
  case LaunchFamily::postprocess_align:
    expected.num_accepted = out.num_accepted;
    break;
  case LaunchFamily::preprocess_align:
    expected.state_idx = out.state_idx;
    expected.num_accepted = out.num_accepted;
    expected.src_col = out.src_col;
    expected.token_bias = out.token_bias;
    break;
  case LaunchFamily::precopy:
    break;
  }
  return expected;
}

RC_GTEST_PROP(OracleProps, ALaunchWithoutCopiesChangesNothingButItsOutputs, ()) {
  model::LaunchCase c = arbitrary_case(arbitrary_kind());
  if (family_of(c.kind) == LaunchFamily::precopy)
    for (std::size_t s = 0; s < c.requests.src_col.size(); ++s) // force "no copy" everywhere
      c.requests.src_col[s] = *rc::gen::element(-1, c.requests.state_idx[s]);
  const model::LaunchResult r = test_util::run_launch_checked(c);
  RC_TAG(std::string(model::to_string(c.kind)));
  if (!is_postprocess(c.kind)) RC_ASSERT(r.decisions.empty());
  RC_PRE(r.decisions.empty()); // postprocess kinds: only the cases that happen not to copy
  for (std::size_t a = 0; a < c.arenas.size(); ++a)
    RC_ASSERT(c.arenas[a].first_difference(r.arenas[a]) == -1);
  RC_ASSERT(r.requests == with_outputs_of(c.requests, r.requests, c.kind));
  RC_ASSERT(r.status == model::LaunchStatus::ok);
}

// One V2 step of consistent requests: a request with nc computed tokens and qlen scheduled
// (drafts included) has a table row of cdiv(nc + qlen, B) + nsb columns (pads after), an
// old column that never lies past the new one, and accepts 1..1+drafts tokens.
struct V2Step {
  model::LaunchCase pre; // preprocess_align
  std::vector<std::int32_t> row_width;
  std::vector<std::int32_t> drafts;
};

V2Step consistent_v2_step() {
  const model::Layout layout = arbitrary_layout();
  const std::int32_t B = layout.config.mamba_block_size;
  const std::int32_t nsb = layout.config.num_spec_blocks;
  const std::int32_t num_reqs = draw(1, 4);
  V2Step step{.pre = test_util::make_case(layout, LaunchKind::preprocess_align, num_reqs, num_reqs,
                                          16, 16)};
  model::RequestArrays& r = step.pre.requests;
  r.idx_mapping = arbitrary_idx_mapping(num_reqs, num_reqs);
  r.state_idx.assign(static_cast<std::size_t>(num_reqs), -1);
  r.num_computed.assign(static_cast<std::size_t>(num_reqs), 0);
  r.num_accepted = draws(static_cast<std::size_t>(num_reqs), 1, 1 + nsb);
  r.src_col.assign(static_cast<std::size_t>(num_reqs), -1);
  r.token_bias.assign(static_cast<std::size_t>(num_reqs), 0);
  r.query_start_loc = {0};
  for (std::int32_t b = 0; b < num_reqs; ++b) {
    const std::int32_t s = r.idx_mapping[static_cast<std::size_t>(b)];
    const std::int32_t drafts = draw(0, nsb);
    const std::int32_t qlen = 1 + drafts + draw(0, 1) * draw(0, 9);
    const std::int32_t nc = draw(0, 24);
    const auto width = static_cast<std::int32_t>(model::cdiv(nc + qlen, B) + nsb);
    step.row_width.push_back(width);
    step.drafts.push_back(drafts);
    r.query_start_loc.push_back(r.query_start_loc.back() + qlen);
    std::vector<std::int32_t> row =
        draws(static_cast<std::size_t>(width), 1 + b * 7, 7 + b * 7); // private blocks < 32
    test_util::set_row(step.pre, 0, b, row);
    for (std::int32_t g = 1; g < layout.num_groups(); ++g)
      test_util::set_row(step.pre, g, b, row);
    if (s < 0) continue;
    r.num_computed[static_cast<std::size_t>(s)] = nc;
    const auto new_col = static_cast<std::int32_t>(model::cdiv(nc + qlen, B) - 1);
    r.state_idx[static_cast<std::size_t>(s)] = nc == 0 ? -1 : draw(0, new_col);
  }
  return step;
}

RC_GTEST_PROP(OracleProps, PreprocessThenPostprocessAlignKeepsStateIdxInsideItsRow, ()) {
  const V2Step step = consistent_v2_step();
  const model::LaunchResult pre = test_util::run_launch_checked(step.pre);
  model::LaunchCase post = step.pre.clone();
  post.kind = LaunchKind::postprocess_align;
  post.requests = {.idx_mapping = step.pre.requests.idx_mapping,
                   .num_accepted = pre.requests.num_accepted,
                   .state_idx = pre.requests.state_idx,
                   .new_num_computed = step.pre.requests.num_computed};
  for (std::int32_t b = 0; b < post.num_reqs; ++b) {
    const std::int32_t s = post.requests.idx_mapping[static_cast<std::size_t>(b)];
    if (s < 0) continue;
    const auto si = static_cast<std::size_t>(s);
    const auto bi = static_cast<std::size_t>(b);
    const std::int32_t a = draw(1, 1 + step.drafts[bi]); // this step's accepted count
    const std::int32_t qlen =
        step.pre.requests.query_start_loc[bi + 1] - step.pre.requests.query_start_loc[bi];
    post.requests.num_accepted[si] = a;
    post.requests.new_num_computed[si] += qlen - step.drafts[bi] + a - 1;
    RC_ASSERT(pre.requests.state_idx[si] >= 0);
    RC_ASSERT(pre.requests.state_idx[si] < step.row_width[bi] - post.layout.config.num_spec_blocks);
  }
  const model::LaunchResult result =
      test_util::run_launch_checked(post); // an InputError here fails the property
  RC_TAG(result.decisions.empty() ? "no copy" : "copies");
  for (const model::CopyDecision& d : result.decisions) {
    RC_ASSERT(d.dst_col >= 0);
    RC_ASSERT(d.dst_col <= d.src_col);
    RC_ASSERT(d.src_col + d.token_bias < step.row_width[static_cast<std::size_t>(d.batch_row)]);
  }
  for (std::int32_t b = 0; b < post.num_reqs; ++b) {
    const std::int32_t s = post.requests.idx_mapping[static_cast<std::size_t>(b)];
    if (s < 0) continue;
    const std::int32_t state_idx = result.requests.state_idx[static_cast<std::size_t>(s)];
    RC_ASSERT(state_idx >= 0);
    RC_ASSERT(state_idx < step.row_width[static_cast<std::size_t>(b)]);
  }
}

} // namespace
} // namespace mc::oracle
