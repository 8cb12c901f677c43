// The validity rules of model/LAUNCH_KINDS.md, checked from the arrays and tables.
#include "contract_footprint.h"

#include "model/launch_kinds.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <utility>

namespace mc::fuzz::testing {
namespace {

using I32 = std::int32_t;
using model::LaunchFamily;
using Arrays = std::vector<std::pair<const char*, const std::vector<I32>*>>;

Arrays slot_arrays(const model::LaunchCase& c) {
  const model::RequestArrays& r = c.requests;
  switch (model::launch_kind_info(c.kind).family) {
  case LaunchFamily::postprocess:
    return {{"num_accepted", &r.num_accepted},   {"state_idx", &r.state_idx},
            {"num_scheduled", &r.num_scheduled}, {"num_computed", &r.num_computed},
            {"num_draft", &r.num_draft},         {"num_accepted_out", &r.num_accepted_out}};
  case LaunchFamily::postprocess_align:
    return {{"num_accepted", &r.num_accepted},
            {"state_idx", &r.state_idx},
            {"new_num_computed", &r.new_num_computed}};
  case LaunchFamily::precopy:
    return {{"state_idx", &r.state_idx}, {"src_col", &r.src_col}, {"token_bias", &r.token_bias}};
  case LaunchFamily::preprocess_align:
    return {{"state_idx", &r.state_idx},
            {"num_computed", &r.num_computed},
            {"num_accepted", &r.num_accepted},
            {"src_col", &r.src_col},
            {"token_bias", &r.token_bias}};
  }
  return {};
}

std::optional<std::string> check_arrays(const model::LaunchCase& c) {
  for (const auto& [name, v] : slot_arrays(c))
    if (static_cast<I32>(v->size()) != c.num_slots)
      return fmt::format("{} has {} entries for {} slots", name, v->size(), c.num_slots);
  const auto& map = c.requests.idx_mapping;
  if (!model::uses_idx_mapping(c.kind)) {
    if (!map.empty() || c.num_slots != c.num_reqs) return "a V1 kind with idx_mapping or slots";
    return std::nullopt;
  }
  if (static_cast<I32>(map.size()) != c.num_reqs) return "idx_mapping is not num_reqs long";
  std::set<I32> seen;
  for (const I32 s : map) {
    if (s == model::kPadSlot) continue;
    if (s < 0 || s >= c.num_slots) return fmt::format("idx_mapping entry {} out of range", s);
    if (!seen.insert(s).second) return fmt::format("idx_mapping maps two rows to slot {}", s);
  }
  if (model::launch_kind_info(c.kind).family == LaunchFamily::preprocess_align) {
    const auto& q = c.requests.query_start_loc;
    if (static_cast<I32>(q.size()) != c.num_reqs + 1) return "query_start_loc length";
    for (std::size_t i = 1; i < q.size(); ++i)
      if (q[i] < q[i - 1]) return fmt::format("query_start_loc decreases at {}", i);
  }
  return std::nullopt;
}

std::optional<std::string> check_tables(const model::LaunchCase& c) {
  const auto& groups = c.block_tables.groups;
  if (static_cast<I32>(groups.size()) != c.layout.num_groups()) return "one table per group";
  // The generator gives per-slot tables one row per slot, the others one per batch row.
  const I32 rows = model::tables_by_slot(c.kind) ? c.num_slots : c.num_reqs;
  for (const model::BlockTable& t : groups) {
    if (t.num_rows != rows) return fmt::format("table rows {} != {}", t.num_rows, rows);
    if (t.row_width != groups[0].row_width || t.row_stride != groups[0].row_stride)
      return "groups with different table geometry";
    if (t.block_ids.size() != static_cast<std::size_t>(t.num_rows) * t.row_stride)
      return "table storage size";
  }
  return std::nullopt;
}

struct GroupKinds {
  bool conv = false;
  bool temporal = false;
};

std::vector<GroupKinds> group_kinds(const model::Layout& layout) {
  std::vector<GroupKinds> kinds(static_cast<std::size_t>(layout.num_groups()));
  for (const model::StateTensor& t : layout.tensors)
    (t.kind() == model::StateKind::conv ? kinds[static_cast<std::size_t>(t.group)].conv
                                        : kinds[static_cast<std::size_t>(t.group)].temporal) = true;
  return kinds;
}

// Columns and block ids of every copy, then no (group, block) written by one row and
// read or written by another.
std::optional<std::string> check_copies(const model::LaunchCase& c, const Footprint& f) {
  const std::vector<GroupKinds> kinds = group_kinds(c.layout);
  std::map<std::pair<I32, I32>, std::set<I32>> readers, writers; // (group, block) -> rows
  for (const PlannedCopy& p : f.copies) {
    for (I32 g = 0; g < c.layout.num_groups(); ++g) {
      const model::BlockTable& t = c.block_tables.groups[static_cast<std::size_t>(g)];
      std::vector<I32> reads;
      if (kinds[static_cast<std::size_t>(g)].conv) reads.push_back(p.src_col);
      if (kinds[static_cast<std::size_t>(g)].temporal) reads.push_back(p.src_col + p.bias);
      for (const I32 col : reads) {
        if (col < 0 || col >= t.row_width)
          return fmt::format("row {} group {} reads column {} of {}", p.batch_row, g, col,
                             t.row_width);
        const I32 id = t.at(p.table_row, col);
        if (id < 0 || id >= c.layout.spec.num_blocks)
          return fmt::format("row {} group {} reads block {}", p.batch_row, g, id);
        readers[{g, id}].insert(p.batch_row);
      }
      if (p.dst_col < 0 || p.dst_col >= t.row_width)
        return fmt::format("row {} group {} writes column {}", p.batch_row, g, p.dst_col);
      const I32 id = t.at(p.table_row, p.dst_col);
      if (id < 0 || id >= c.layout.spec.num_blocks)
        return fmt::format("row {} group {} writes block {}", p.batch_row, g, id);
      writers[{g, id}].insert(p.batch_row);
    }
  }
  for (const auto& [key, rows] : writers) {
    std::set<I32> touching = rows;
    if (const auto it = readers.find(key); it != readers.end())
      touching.insert(it->second.begin(), it->second.end());
    if (touching.size() > 1)
      return fmt::format("group {} block {} is written by row {} and touched by {} rows", key.first,
                         key.second, *rows.begin(), touching.size());
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> find_invalidity(const model::LaunchCase& c) {
  if (auto e = check_arrays(c)) return e;
  if (auto e = check_tables(c)) return e;
  return check_copies(c, contract_footprint(c));
}

} // namespace mc::fuzz::testing
