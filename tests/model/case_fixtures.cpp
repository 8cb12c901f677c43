#include "tests/model/case_fixtures.h"

#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/presets.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace mc::model::testing {
namespace {

constexpr std::int32_t kNumReqs = 3;
constexpr std::int32_t kRowWidth = 6;
constexpr std::int32_t kRowStride = 8; // a gap of 2 columns

// Row r holds blocks 1 + r * kRowWidth + c: no two rows share a block, so copies of
// different requests never overlap; the last column of the last row is a pad slot.
BlockTables make_tables(const Layout& layout, std::int32_t num_rows) {
  BlockTables tables;
  for (std::int32_t g = 0; g < layout.num_groups(); ++g) {
    BlockTable t = BlockTable::make(num_rows, kRowWidth, kRowStride);
    for (std::int32_t r = 0; r < num_rows; ++r)
      for (std::int32_t c = 0; c < kRowWidth; ++c)
        t.at(r, c) =
            static_cast<std::int32_t>((1 + r * kRowWidth + c + g) % (layout.spec.num_blocks - 1)) +
            1;
    t.at(num_rows - 1, kRowWidth - 1) = kPadSlot;
    tables.groups.push_back(std::move(t));
  }
  return tables;
}

std::vector<Arena> make_arenas(const Layout& layout, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Arena> arenas;
  for (const ArenaSpec& spec : layout.arenas) {
    Arena a(spec.size_bytes());
    a.poison();
    // A seeded pattern over a few blocks, so that copies move bytes that differ.
    for (std::int64_t i = spec.page_bytes; i < std::min(a.size_bytes(), 20 * spec.page_bytes); ++i)
      a.data()[i] = static_cast<std::byte>(rng());
    arenas.push_back(std::move(a));
  }
  return arenas;
}

std::vector<std::int32_t> values(std::int32_t n, std::int32_t first, std::int32_t step) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = first + i * step;
  return v;
}

// Inputs per kind (LAUNCH_KINDS.md). V2 kinds: 5 slots, rows map to slots 3, -1 (skipped), 0.
RequestArrays make_arrays(LaunchKind kind, std::int32_t num_slots) {
  RequestArrays a;
  const std::int32_t n = num_slots;
  const LaunchKindInfo& info = launch_kind_info(kind);
  switch (info.family) {
  case LaunchFamily::postprocess:
    a.num_accepted = {1, 2, 3};
    a.state_idx = {0, 1, 2};
    a.num_scheduled = {3, 3, 4};
    a.num_computed = {4, 8, 6};
    a.num_draft = {2, 2, 2};
    break;
  case LaunchFamily::postprocess_align:
    a.idx_mapping = {3, -1, 0};
    a.num_accepted = values(n, 1, 1);
    a.state_idx = values(n, 0, 1);
    a.new_num_computed = values(n, 7, 3);
    break;
  case LaunchFamily::precopy:
    if (!info.by_slot) {
      a.src_col = {0, -1, 2};
      a.state_idx = {1, 1, 2};
      a.token_bias = {1, 0, 0};
      break;
    }
    a.idx_mapping = {3, -1, 0};
    a.state_idx = {3, 0, 0, 2, 4};  // slot 0 copies col 1 -> 3 (bias 1), slot 3 col 0 -> 2
    a.src_col = {1, -1, 2, 0, 4};   //   with bias 2 (temporal reads col 2)
    a.token_bias = {1, 0, 0, 2, 0}; // slots 1, 2, 4 are not in the batch
    break;
  case LaunchFamily::preprocess_align:
    a.idx_mapping = {3, -1, 0};
    a.state_idx = values(n, 0, 1);
    a.num_computed = values(n, 4, 4);
    a.num_accepted = values(n, 1, 0);
    a.query_start_loc = {0, 3, 3, 6};
    a.src_col = values(n, -1, 0);
    a.token_bias = values(n, 0, 0);
    break;
  }
  return a;
}

std::byte* block_base(std::vector<Arena>& arenas, const StateTensor& t, std::int32_t block_id) {
  return arenas[static_cast<std::size_t>(t.arena)].data() + t.block_offset_bytes(block_id);
}

// One state copy (LAUNCH_KINDS.md "The copy of one state"), applied with memmove.
CopyDecision copy_state(const LaunchCase& c, std::vector<Arena>& arenas, std::int32_t tensor,
                        std::int32_t row, std::int32_t src_col, std::int32_t dst_col,
                        std::int32_t bias) {
  const StateTensor& t = c.layout.tensors[static_cast<std::size_t>(tensor)];
  const BlockTable& bt = c.block_tables.groups[static_cast<std::size_t>(t.group)];
  CopyDecision d{.batch_row = row,
                 .tensor = tensor,
                 .group = t.group,
                 .layer = t.layer,
                 .state = t.state,
                 .src_col = src_col,
                 .dst_col = dst_col,
                 .token_bias = bias};
  d.dst_block_id = bt.at(row, dst_col);
  const std::int64_t kept = std::max<std::int64_t>(t.shape.conv_state_len - bias, 0);
  if (t.kind() == StateKind::temporal) {
    d.src_block_id = bt.at(row, src_col + bias);
    d.bytes = t.natural_bytes;
    std::memmove(block_base(arenas, t, d.dst_block_id), block_base(arenas, t, d.src_block_id),
                 static_cast<std::size_t>(d.bytes));
  } else if (t.conv_layout == ConvLayout::SD) {
    d.src_block_id = bt.at(row, src_col);
    d.src_byte_offset = bias * t.shape.conv_dim * t.elem_size;
    d.bytes = kept * t.shape.conv_dim * t.elem_size;
    std::memmove(block_base(arenas, t, d.dst_block_id),
                 block_base(arenas, t, d.src_block_id) + d.src_byte_offset,
                 static_cast<std::size_t>(d.bytes));
  } else {
    d.src_block_id = bt.at(row, src_col);
    d.src_byte_offset = bias * t.elem_size;
    const std::int64_t row_bytes = t.shape.conv_state_len * t.elem_size;
    for (std::int64_t r = 0; r < t.shape.conv_dim; ++r)
      std::memmove(block_base(arenas, t, d.dst_block_id) + r * row_bytes,
                   block_base(arenas, t, d.src_block_id) + r * row_bytes + d.src_byte_offset,
                   static_cast<std::size_t>(kept * t.elem_size));
    d.bytes = t.shape.conv_dim * kept * t.elem_size;
  }
  return d;
}

std::vector<Arena> clone_all(const std::vector<Arena>& arenas) {
  std::vector<Arena> out;
  for (const Arena& a : arenas)
    out.push_back(a.clone());
  return out;
}

} // namespace

LaunchCase make_case(std::string_view preset, ConvLayout conv_layout, LaunchKind kind,
                     std::uint32_t seed) {
  const Preset& p = find_preset(preset);
  CacheConfig config = p.config;
  config.conv_layout = conv_layout;
  LaunchCase c{.layout = build_layout(config, p.spec), .kind = kind, .num_reqs = kNumReqs};
  c.num_slots = uses_idx_mapping(kind) ? 5 : kNumReqs;
  c.block_tables = make_tables(c.layout, tables_by_slot(kind) ? c.num_slots : kNumReqs + 1);
  c.requests = make_arrays(kind, c.num_slots);
  c.arenas = make_arenas(c.layout, seed);
  return c;
}

LaunchResult make_result(const LaunchCase& c, LaunchStatus status, std::uint32_t seed) {
  LaunchResult r{.status = status, .requests = c.requests, .arenas = clone_all(c.arenas)};
  std::mt19937 rng(seed);
  const auto fill = [&](std::vector<std::int32_t>& v, std::size_t n) {
    v.resize(n);
    for (std::int32_t& x : v)
      x = static_cast<std::int32_t>(rng() % 1000) - 500;
  };
  const std::size_t slots = static_cast<std::size_t>(c.num_slots);
  fill(r.requests.num_accepted_out, slots);
  fill(r.requests.src_col, slots);
  fill(r.requests.query_start_loc, slots == 0 ? 0 : static_cast<std::size_t>(c.num_reqs) + 1);
  if (status == LaunchStatus::unsupported) {
    r.unsupported_reason = "request 1, tensor 0: DS conv with token_bias 2 cannot be one flat "
                           "copy (\"quoted\", unicode \xc2\xb5s)";
    return r;
  }
  const std::int32_t num_tensors = static_cast<std::int32_t>(c.layout.tensors.size());
  for (std::int32_t row = 0; row < c.num_reqs; ++row)
    for (std::int32_t t = 0; t < num_tensors; t += 2)
      r.decisions.push_back(CopyDecision{.batch_row = row,
                                         .slot = row + 1,
                                         .tensor = t,
                                         .group = row,
                                         .layer = t / 2,
                                         .state = 1,
                                         .src_col = -3,
                                         .dst_col = 4,
                                         .token_bias = 2,
                                         .src_block_id = 17,
                                         .dst_block_id = -1,
                                         .src_byte_offset = (std::int64_t{1} << 40) + t,
                                         .bytes = (std::int64_t{5} << 32) + row});
  for (Arena& a : r.arenas)
    for (std::int64_t i = 0; i < a.size_bytes(); i += 97)
      a.data()[i] = static_cast<std::byte>(rng());
  return r;
}

LaunchResult precopy_result(const LaunchCase& c) {
  MC_ASSERT(c.kind == LaunchKind::precopy);
  LaunchResult r{.requests = c.requests, .arenas = clone_all(c.arenas)};
  const RequestArrays& a = c.requests;
  for (std::int32_t row = 0; row < c.num_reqs; ++row) {
    const std::int32_t slot = a.idx_mapping[static_cast<std::size_t>(row)];
    if (slot < 0) continue;
    const std::size_t s = static_cast<std::size_t>(slot);
    if (a.src_col[s] < 0 || a.src_col[s] == a.state_idx[s]) continue;
    for (std::size_t t = 0; t < c.layout.tensors.size(); ++t) {
      CopyDecision d = copy_state(c, r.arenas, static_cast<std::int32_t>(t), row, a.src_col[s],
                                  a.state_idx[s], a.token_bias[s]);
      d.slot = slot;
      r.decisions.push_back(d);
    }
  }
  return r;
}

} // namespace mc::model::testing
