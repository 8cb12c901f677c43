// The launch-kind table (model/launch_kinds.h) and the shape check written from it: a case
// sized by the table passes, and every array the table says a kind uses is checked.
#include "model/errors.h"
#include "model/launch_kinds.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <string>

namespace mc::model {
namespace {

constexpr std::int32_t kRows = 3;
constexpr std::int32_t kSlots = 5;

// A case of `kind` whose used arrays have exactly the lengths their indexing gives.
LaunchCase well_formed(LaunchKind kind) {
  const Preset& preset = find_preset("tiny-mamba2");
  LaunchCase c{.layout = build_layout(preset.config, preset.spec), .kind = kind};
  const LaunchKindInfo& info = launch_kind_info(kind);
  c.num_reqs = kRows;
  c.num_slots = info.by_slot ? kSlots : kRows;
  for (const ArenaSpec& a : c.layout.arenas)
    c.arenas.emplace_back(a.size_bytes());
  for (std::int32_t g = 0; g < c.layout.num_groups(); ++g)
    c.block_tables.groups.push_back(
        BlockTable::make(info.tables_by_slot ? c.num_slots : kRows, 4, 6));
  for (std::size_t i = 0; i < kRequestArrays.size(); ++i) {
    if (info.arrays[i] == ArrayUse::unused) continue;
    const RequestArrayField& f = kRequestArrays[i];
    (c.requests.*f.member)
        .assign(static_cast<std::size_t>(array_length(f.indexing, c.num_reqs, c.num_slots)), 0);
  }
  if (info.by_slot) c.requests.idx_mapping = {4, -1, 0};
  return c;
}

std::string shape_error(const LaunchCase& c) {
  try {
    validate_launch_shape(c);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

TEST(LaunchKinds, TheTableFollowsTheEnumAndItsNames) {
  ASSERT_EQ(std::size(kAllLaunchKinds), kLaunchKinds.size());
  for (std::size_t k = 0; k < kLaunchKinds.size(); ++k) {
    EXPECT_EQ(kLaunchKinds[k].kind, kAllLaunchKinds[k]);
    EXPECT_EQ(parse_launch_kind(kLaunchKinds[k].name), kLaunchKinds[k].kind);
    EXPECT_EQ(to_string(kLaunchKinds[k].kind), kLaunchKinds[k].name);
    // idx_mapping is used exactly by the kinds that index by slot.
    EXPECT_EQ(kLaunchKinds[k].arrays[0] == ArrayUse::read, kLaunchKinds[k].by_slot);
  }
  EXPECT_TRUE(uses_idx_mapping(LaunchKind::precopy));
  EXPECT_FALSE(uses_idx_mapping(LaunchKind::batch_copy));
  EXPECT_FALSE(uses_idx_mapping(LaunchKind::precopy_v1));
  EXPECT_TRUE(uses_idx_mapping(LaunchKind::precopy_slot_tables));
  // Per-slot tables are the two V2 copy kinds' second convention, nothing else's.
  for (const LaunchKindInfo& info : kLaunchKinds)
    EXPECT_EQ(info.tables_by_slot, info.kind == LaunchKind::precopy_slot_tables ||
                                       info.kind == LaunchKind::postprocess_align_slot_tables)
        << info.name;
  EXPECT_EQ(launch_kind_info(LaunchKind::precopy_slot_tables).arrays,
            launch_kind_info(LaunchKind::precopy).arrays);
  EXPECT_EQ(launch_kind_info(LaunchKind::postprocess_align_slot_tables).arrays,
            launch_kind_info(LaunchKind::postprocess_align).arrays);
  EXPECT_EQ(launch_kind_info(LaunchKind::precopy_v1).arrays,
            launch_kind_info(LaunchKind::batch_copy).arrays);
  EXPECT_EQ(launch_kind_info(LaunchKind::batch_copy).work, LaunchWork::copy_plan);
  EXPECT_FALSE(launch_kind_info(LaunchKind::preprocess_align).moves_state);
}

TEST(LaunchKinds, AKindThatVariesAnotherSharesItsFamilyAndPhase) {
  const auto family = [](LaunchKind k) { return launch_kind_info(k).family; };
  const auto phase = [](LaunchKind k) { return launch_kind_info(k).phase; };
  for (const LaunchKind k : {LaunchKind::precopy, LaunchKind::precopy_v1,
                             LaunchKind::precopy_slot_tables, LaunchKind::batch_copy}) {
    EXPECT_EQ(family(k), LaunchFamily::precopy) << to_string(k);
    EXPECT_EQ(phase(k), LaunchPhase::pre_step) << to_string(k);
  }
  for (const LaunchKind k :
       {LaunchKind::postprocess_align, LaunchKind::postprocess_align_slot_tables}) {
    EXPECT_EQ(family(k), LaunchFamily::postprocess_align) << to_string(k);
    EXPECT_EQ(phase(k), LaunchPhase::post_step) << to_string(k);
  }
  EXPECT_EQ(family(LaunchKind::postprocess), LaunchFamily::postprocess);
  EXPECT_EQ(phase(LaunchKind::postprocess), LaunchPhase::post_step);
  EXPECT_EQ(family(LaunchKind::preprocess_align), LaunchFamily::preprocess_align);
  EXPECT_EQ(phase(LaunchKind::preprocess_align), LaunchPhase::pre_step);
  // Every kind of a family reads and writes the same arrays but for idx_mapping (its indexing).
  for (const LaunchKindInfo& a : kLaunchKinds) {
    for (const LaunchKindInfo& b : kLaunchKinds) {
      if (a.family == b.family && a.by_slot == b.by_slot) {
        EXPECT_EQ(a.arrays, b.arrays) << a.name << " " << b.name;
      }
    }
  }
  EXPECT_EQ(to_string(LaunchFamily::postprocess_align), "postprocess_align");
  EXPECT_EQ(to_string(LaunchPhase::post_step), "post_step");
  EXPECT_EQ(to_string(LaunchWork::copy_plan), "copy_plan");
}

TEST(LaunchKinds, AWellFormedCasePassesForEveryKind) {
  for (const LaunchKindInfo& info : kLaunchKinds)
    EXPECT_EQ(shape_error(well_formed(info.kind)), "") << info.name;
}

TEST(LaunchKinds, EveryUsedArrayIsCheckedAndNoOther) {
  for (const LaunchKindInfo& info : kLaunchKinds) {
    for (std::size_t i = 1; i < kRequestArrays.size(); ++i) {
      const RequestArrayField& f = kRequestArrays[i];
      LaunchCase c = well_formed(info.kind);
      std::vector<std::int32_t>& array = c.requests.*f.member;
      const std::int64_t length = array_length(f.indexing, c.num_reqs, c.num_slots);
      array.assign(static_cast<std::size_t>(length) + 1, 0); // one entry too many
      const std::string error = shape_error(c);
      if (info.arrays[i] == ArrayUse::unused) {
        EXPECT_EQ(error, "") << info.name << " " << f.name;
        continue;
      }
      EXPECT_EQ(error, fmt::format("launch {}: array {} has {} entries, expected {}", info.name,
                                   f.name, length + 1, length));
      array.clear();
      EXPECT_EQ(shape_error(c) == "", info.arrays[i] == ArrayUse::written_or_empty)
          << info.name << " " << f.name << ": " << shape_error(c);
    }
  }
}

TEST(LaunchKinds, SlotsAndTablesAreChecked) {
  LaunchCase v1 = well_formed(LaunchKind::postprocess);
  v1.num_slots = kRows + 1;
  EXPECT_EQ(shape_error(v1), "launch postprocess: num_slots 4 must equal num_reqs 3 (V1 indexes "
                             "by row)");
  LaunchCase shared = well_formed(LaunchKind::precopy);
  shared.requests.idx_mapping = {4, 1, 4};
  EXPECT_EQ(shape_error(shared),
            "launch precopy: request rows 0 and 2 both map to slot 4 in idx_mapping");
  LaunchCase outside = well_formed(LaunchKind::preprocess_align);
  outside.requests.idx_mapping = {0, 5, 1};
  EXPECT_EQ(shape_error(outside),
            "launch preprocess_align: request row 1: idx_mapping slot 5 is outside [-1, 5)");
  LaunchCase short_table = well_formed(LaunchKind::batch_copy);
  short_table.block_tables.groups[0] = BlockTable::make(2, 4, 6);
  EXPECT_EQ(shape_error(short_table),
            "launch batch_copy: block table of group 0 has 2 rows for 3 request rows");
  LaunchCase slot_rows = well_formed(LaunchKind::precopy_slot_tables);
  slot_rows.block_tables.groups[0] = BlockTable::make(kSlots - 1, 4, 6);
  EXPECT_EQ(shape_error(slot_rows), "launch precopy_slot_tables: block table of group 0 has 4 "
                                    "rows for 5 slots (its rows are found by slot)");
  LaunchCase v1_mapping = well_formed(LaunchKind::precopy_v1);
  v1_mapping.requests.idx_mapping = {0, 1, 2};
  EXPECT_EQ(shape_error(v1_mapping), "launch precopy_v1: array idx_mapping has 3 entries, "
                                     "expected 0");
  LaunchCase arenas = well_formed(LaunchKind::postprocess_align);
  arenas.arenas.pop_back();
  EXPECT_NE(shape_error(arenas).find("arenas given, the layout has"), std::string::npos);
  EXPECT_NO_THROW(validate_launch_arrays(arenas)); // the arenas live elsewhere
}

} // namespace
} // namespace mc::model
