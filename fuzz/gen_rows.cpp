// Per-request generation (see gen_rows.h): outcomes first, counters derived from them.
#include "fuzz/gen_rows.h"

#include "fuzz/gen_pick.h"
#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/prng.h"

#include <algorithm>

namespace mc::fuzz::detail {
namespace {

using I32 = std::int32_t;
using model::LaunchFamily;
using model::SplitMix64;

I32 cdiv32(I32 a, I32 b) {
  return static_cast<I32>(model::cdiv(a, b));
}

RowShape window_shape(I32 first_col, I32 num_spec) {
  RowShape shape;
  if (first_col < 0) return shape;
  for (I32 c = first_col; c <= first_col + num_spec; ++c)
    shape.live_cols.push_back(c);
  return shape;
}

RowShape copy_shape(I32 src_col, I32 dst_col, I32 bias, I32 num_spec) {
  RowShape shape = window_shape(dst_col + 1, num_spec - 1); // the spec blocks after dst
  shape.copies = true;
  shape.src_col = src_col;
  shape.dst_col = dst_col;
  shape.bias = bias;
  return shape;
}

I32 pick_accepted(I32 num_spec) {
  return 1 + pick_int(0, num_spec);
}

// A source column near the destination (the previous block, the next one) or anywhere.
I32 pick_source(I32 dst_col, I32 num_spec) {
  switch (pick_weighted({35, 30, 35})) {
  case 0:
    return std::max(dst_col - 1, 0);
  case 1:
    return dst_col + 1;
  default:
    return pick_int(0, dst_col + num_spec + 1);
  }
}

struct SaveRow {
  I32 a = 1;
  I32 running = 1; // tokens whose state is the running state
  I32 state_idx = 0;
  RowShape shape;
};

// The fused save (postprocess kinds): copy iff floor((running + a - 1) / B) * B >= running.
SaveRow pick_save_row(const RowContext& ctx) {
  const I32 B = ctx.block_size;
  const I32 ns = ctx.num_spec;
  I32 a = pick_accepted(ns);
  const SaveRowWeights& w = ctx.save_weights;
  // no copy, copy, same column, same column with a shift
  const int outcome = pick_weighted({w.no_copy, w.copy, w.same_column, w.same_column_shift});
  // A shift needs bias >= 1, so a >= 2: drafts, and a block of 2 tokens or a column k >= 2.
  const bool shift = outcome == 3 && ns >= 1;
  if (shift && a < 2) a = 2 + pick_int(0, ns - 1);
  if (outcome == 0 && B >= a + 1) {
    // running mod B in [1, B - a]: the accepted tokens stay inside the running block.
    const I32 q = pick_int(0, ctx.cols_max - 1);
    const I32 running = q * B + pick_int(1, B - a);
    const int idx_choice = pick_weighted({70, 10, 20});
    const I32 state_idx = idx_choice == 0 ? q : idx_choice == 1 ? -1 : pick_int(0, q + ns + 1);
    return {a, running, state_idx, window_shape(state_idx, ns)};
  }
  // aligned = k * B >= running = k * B - bias needs bias in [max(0, a - B), a - 1].
  const I32 bias_lo = std::max(shift ? 1 : 0, a - B);
  const I32 k_min = std::max<I32>(1, cdiv32(bias_lo + 1, B));
  const I32 k = pick_int(k_min, std::max(k_min, ctx.cols_max));
  const I32 bias = pick_int(bias_lo, std::min<I32>(a - 1, k * B - 1));
  const I32 dst = k - 1;
  const I32 src = outcome >= 2 ? dst : pick_source(dst, ns);
  MC_ASSERT(k * B - bias >= 1);
  if (src == dst && bias == 0) return {a, k * B, src, window_shape(dst, ns)}; // reset only
  return {a, k * B - bias, src, copy_shape(src, dst, bias, ns)};
}

struct CopyRow {
  I32 src_col = -1;
  I32 dst_col = 0;
  I32 bias = 0;
  RowShape shape;
};

// precopy and batch_copy: skip (src < 0), skip (src == dst), or a copy. precopy_v1 rows are
// as vLLM's V1 runner writes them: a row that copies nothing has src_col -1 and bias 0
// (mostly; the contract skips src == dst too, so that stays drawn now and then).
CopyRow pick_copy_row(const RowContext& ctx, I32 bias_hi, bool v1_marks) {
  const int outcome = v1_marks ? pick_weighted({30, 5, 65}) : pick_weighted({15, 15, 70});
  const I32 dst = pick_int(0, ctx.cols_max - 1);
  const I32 bias = pick_int(0, bias_hi);
  if (outcome == 0 && v1_marks) return {-1, dst, 0, window_shape(dst, ctx.num_spec)};
  if (outcome == 0)
    return {pick_bool(20) ? -pick_int(2, 5) : -1, dst, bias, window_shape(dst, ctx.num_spec)};
  if (outcome == 1) return {dst, dst, bias, window_shape(dst, ctx.num_spec)};
  I32 src = pick_source(dst, ctx.num_spec);
  if (src == dst) src = dst + 1;
  return {src, dst, bias, copy_shape(src, dst, bias, ctx.num_spec)};
}

struct PrepRow {
  I32 old_idx = -1;
  I32 computed = 0;
  I32 qlen = 1;
  I32 a = 1;
  RowShape shape;
};

// preprocess_align: computed counts near block boundaries so that the new index often changes.
PrepRow pick_prep_row(const RowContext& ctx) {
  const I32 B = ctx.block_size;
  const I32 ns = ctx.num_spec;
  const I32 a = pick_bool(10) ? 0 : pick_accepted(ns);
  const bool decode = pick_bool(60);
  const I32 qlen = decode ? 1 + pick_int(0, ns) : (pick_bool(5) ? 0 : pick_int(1, 3 * B));
  const I32 m = pick_int(0, ctx.cols_max - 1);
  const I32 computed = std::max(0, m * B - pick_int(0, std::min(B - 1, ns + 1)));
  const I32 new_idx = cdiv32(computed + qlen, B) - 1;
  I32 old_idx = 0;
  switch (pick_weighted({25, 25, 25, 25})) {
  case 0:
    old_idx = static_cast<I32>(model::floor_div(computed - 1, B));
    break; // a new request
  case 1:
    old_idx = new_idx;
    break;
  case 2:
    old_idx = new_idx - 1;
    break;
  default:
    old_idx = pick_int(-1, new_idx + 2);
    break;
  }
  RowShape shape;
  for (const I32 c : {old_idx, new_idx})
    if (c >= 0) shape.live_cols.push_back(c);
  return {old_idx, computed, qlen, a, shape};
}

// V2: batch row -> slot; permutations, holes (-1) and more slots than rows.
std::vector<I32> pick_idx_mapping(I32 num_reqs, I32& num_slots) {
  num_slots = num_reqs + (pick_bool(50) ? pick_int(1, std::max<I32>(1, num_reqs)) : 0);
  std::vector<I32> slots(static_cast<std::size_t>(num_slots));
  for (I32 s = 0; s < num_slots; ++s)
    slots[static_cast<std::size_t>(s)] = s;
  if (pick_bool(60)) {
    SplitMix64 rng{pick_seed()};
    for (std::size_t i = slots.size(); i > 1; --i)
      std::swap(slots[i - 1], slots[rng.below(i)]);
  }
  slots.resize(static_cast<std::size_t>(num_reqs));
  if (pick_bool(35))
    for (I32& s : slots)
      if (pick_bool(25)) s = model::kPadSlot;
  return slots;
}

// The arrays the family reads, sized num_slots; V2 slots outside the batch hold stale values
// that must survive the launch.
void init_arrays(model::RequestArrays& r, LaunchFamily family, I32 num_slots) {
  SplitMix64 rng{pick_seed()};
  const auto stale = [&] {
    std::vector<I32> v(static_cast<std::size_t>(num_slots));
    for (I32& x : v)
      x = static_cast<I32>(rng.below(42)) - 1;
    return v;
  };
  switch (family) {
  case LaunchFamily::postprocess:
    r.num_accepted = r.state_idx = r.num_scheduled = r.num_computed = r.num_draft = stale();
    break;
  case LaunchFamily::postprocess_align:
    r.num_accepted = stale();
    r.state_idx = stale();
    r.new_num_computed = stale();
    break;
  case LaunchFamily::precopy:
    r.state_idx = stale();
    r.src_col = stale();
    r.token_bias = stale();
    break;
  case LaunchFamily::preprocess_align:
    r.state_idx = stale();
    r.num_computed = stale();
    r.num_accepted = stale();
    r.src_col = stale();
    r.token_bias = stale();
    break;
  }
}

RowShape fill_save_row(LaunchSpec& spec, const RowContext& ctx, std::size_t s) {
  model::RequestArrays& r = spec.requests;
  const SaveRow row = pick_save_row(ctx);
  r.num_accepted[s] = row.a;
  r.state_idx[s] = row.state_idx;
  if (model::launch_kind_info(spec.kind).family != LaunchFamily::postprocess) {
    r.new_num_computed[s] = row.running + row.a - 1;
    return row.shape;
  }
  // V1 counters: running = computed + scheduled - drafts; a decode schedules 1 + drafts.
  const bool decode = pick_bool(60);
  const I32 fresh = decode ? 1 : pick_int(1, std::min(row.running, 4 * ctx.block_size));
  const I32 draft = pick_int(decode ? row.a - 1 : 0, ctx.num_spec);
  r.num_computed[s] = row.running - fresh;
  r.num_scheduled[s] = fresh + draft;
  r.num_draft[s] = draft;
  return row.shape;
}

RowShape fill_row(LaunchSpec& spec, const RowContext& ctx, std::size_t s, I32& qlen) {
  model::RequestArrays& r = spec.requests;
  const model::LaunchKindInfo& info = model::launch_kind_info(spec.kind);
  switch (info.family) {
  case LaunchFamily::postprocess:
  case LaunchFamily::postprocess_align:
    return fill_save_row(spec, ctx, s);
  case LaunchFamily::precopy: {
    // A DS conv window shifted by a bias is no flat copy; maybe_force_unsupported draws it.
    const bool copy_plan = info.work == model::LaunchWork::copy_plan;
    // The V1 runner's fused pre-copy is handed rows staged by its own bookkeeping, which marks
    // a row that copies nothing with src_col -1 and bias 0.
    const bool v1_marks = !info.by_slot && !copy_plan;
    const CopyRow row = pick_copy_row(ctx, copy_plan && ctx.ds_conv ? 0 : ctx.num_spec, v1_marks);
    r.src_col[s] = row.src_col;
    r.state_idx[s] = row.dst_col;
    r.token_bias[s] = row.bias;
    return row.shape;
  }
  case LaunchFamily::preprocess_align: {
    const PrepRow row = pick_prep_row(ctx);
    r.state_idx[s] = row.old_idx;
    r.num_computed[s] = row.computed;
    r.num_accepted[s] = row.a;
    qlen = row.qlen;
    return row.shape;
  }
  }
  return {};
}

// A copy plan (batch_copy) on a DS conv layout: sometimes one copying row gets bias > 0, which the
// contract reports as unsupported (class E).
void maybe_force_unsupported(LaunchSpec& spec, const RowContext& ctx,
                             std::vector<RowShape>& shapes) {
  if (model::launch_kind_info(spec.kind).work != model::LaunchWork::copy_plan || !ctx.ds_conv ||
      !pick_bool(35))
    return;
  std::vector<std::size_t> copying;
  for (std::size_t b = 0; b < shapes.size(); ++b)
    if (shapes[b].copies) copying.push_back(b);
  if (copying.empty()) return;
  const std::size_t b =
      copying[static_cast<std::size_t>(pick_int(0, static_cast<I32>(copying.size()) - 1))];
  shapes[b].bias = pick_int(1, std::max<I32>(1, ctx.num_spec));
  spec.requests.token_bias[b] = shapes[b].bias;
}

} // namespace

std::vector<RowShape> table_row_shapes(const LaunchSpec& spec,
                                       const std::vector<RowShape>& batch_shapes) {
  if (!model::tables_by_slot(spec.kind)) return batch_shapes;
  // Per-slot tables: slot s's request row at row s. A slot no row maps to keeps what its last
  // occupant left (its blocks, never read by a valid launch) or nothing (pads or nulls).
  std::vector<RowShape> rows(static_cast<std::size_t>(spec.num_slots));
  for (RowShape& r : rows) {
    r.mapped = pick_bool(50);
    if (r.mapped) r = window_shape(0, pick_int(0, 2));
  }
  const std::vector<I32>& mapping = spec.requests.idx_mapping;
  for (std::size_t b = 0; b < batch_shapes.size(); ++b) {
    const I32 slot = mapping.empty() ? static_cast<I32>(b) : mapping[b]; // V1: the row's own
    if (slot >= 0) rows[static_cast<std::size_t>(slot)] = batch_shapes[b];
  }
  return rows;
}

std::int32_t RowShape::max_col() const {
  I32 m = -1;
  if (copies) m = std::max({m, src_col + bias, dst_col, src_col});
  for (const I32 c : live_cols)
    m = std::max(m, c);
  return m;
}

} // namespace mc::fuzz::detail

namespace mc::fuzz::detail {

std::vector<RowShape> pick_requests(LaunchSpec& spec, const RowContext& ctx) {
  const I32 n = spec.num_reqs;
  model::RequestArrays& r = spec.requests;
  r = {};
  spec.num_slots = n;
  if (model::uses_idx_mapping(spec.kind)) r.idx_mapping = pick_idx_mapping(n, spec.num_slots);
  const LaunchFamily family = model::launch_kind_info(spec.kind).family;
  init_arrays(r, family, spec.num_slots);
  std::vector<RowShape> shapes(static_cast<std::size_t>(n));
  std::vector<I32> qlens(static_cast<std::size_t>(n), 0);
  for (I32 b = 0; b < n; ++b) {
    const auto bi = static_cast<std::size_t>(b);
    const I32 slot = r.idx_mapping.empty() ? b : r.idx_mapping[bi];
    if (slot < 0) {
      shapes[bi].mapped = false;
      qlens[bi] = pick_int(0, 3); // a skipped row still occupies its query range
      continue;
    }
    shapes[bi] = fill_row(spec, ctx, static_cast<std::size_t>(slot), qlens[bi]);
  }
  maybe_force_unsupported(spec, ctx, shapes);
  if (family == LaunchFamily::postprocess) r.num_accepted_out = r.num_accepted;
  if (family == LaunchFamily::preprocess_align) {
    r.query_start_loc.assign(1, 0);
    for (const I32 q : qlens)
      r.query_start_loc.push_back(r.query_start_loc.back() + q);
  }
  return shapes;
}

} // namespace mc::fuzz::detail
