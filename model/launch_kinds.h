// Each launch kind described once, as data: how it indexes, which per-request arrays it reads
// and writes, whether it moves state, and the shape of its work. model/LAUNCH_KINDS.md is the
// prose; this table is what code walks. The shape checks every consumer makes before it
// decides anything (arenas, block tables, idx_mapping, array lengths) are written here once,
// from the table, so the oracle, the kernels' launcher and the case files agree on what a
// well-formed case is. What a kind decides stays with each side (DESIGN.md, the two walls).
//
// A new launch kind adds an enum value (launch.h), one row of kLaunchKinds, its decision in
// oracle/kinds.cpp and in gpu/kernels, and its generator in fuzz/gen_launch.cpp.
#pragma once

#include "model/launch.h"
#include "model/request_arrays.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

// An invalid value of a launch's inputs. `arrays` names the arrays it was read or computed from
// as kRequestArrays and case files name them ("src_col", "block_table_0"), so that the reader of
// a case directory can name the .npy files that hold it (case_file.h, fail_in_case).
struct LaunchInputError : InputError {
  LaunchInputError(std::vector<std::string> from, const std::string& message)
      : InputError(message), arrays(std::move(from)) {}
  std::vector<std::string> arrays;
};

template <typename... Args>
[[noreturn]] void fail_launch_input(std::vector<std::string> arrays,
                                    fmt::format_string<Args...> format, Args&&... args) {
  throw LaunchInputError(std::move(arrays), fmt::format(format, std::forward<Args>(args)...));
}

// The name of group `group`'s block table among a launch's arrays: "block_table_0".
std::string block_table_array_name(std::size_t group);

// How a launch uses one per-request array. Every used array has the length its indexing gives
// (request_arrays.h); an unused one is ignored and stays as the case gave it.
enum class ArrayUse : std::uint8_t {
  unused,
  read,             // an input
  updated,          // read and written in place
  written,          // an output; entries of slots outside the batch keep their values, so the
                    // case sizes it
  written_or_empty, // an output the launcher initialises when the case leaves it empty
};

// Whether a case must carry the array: every used one but an output the launcher fills in.
// preprocess_align keeps src_col and token_bias of the slots outside its batch, so they come in.
constexpr bool must_come_in(ArrayUse use) {
  return use != ArrayUse::unused && use != ArrayUse::written_or_empty;
}

// The unit of work the kernels spread over their programs.
enum class LaunchWork : std::uint8_t {
  batch_rows, // one decision per batch row, its copies made where it is decided
  copy_plan,  // a flat list of copies planned on the host from the rows (V1 batch_copy)
};

struct LaunchKindInfo {
  LaunchKind kind;
  std::string_view name;
  // V2 kinds: arrays by slot, idx_mapping[batch row] = slot (-1 skips the row); V1 kinds:
  // slot = batch row, idx_mapping empty and num_slots == num_reqs.
  bool by_slot;
  // The block-table row of batch row b: its slot (newer vLLM hands the kernels the
  // per-request-slot tables, #55506; the tables then have a row for every slot) or b itself
  // (the seed: tables gathered in batch order). The same for V1 kinds, whose slot is b.
  bool tables_by_slot;
  bool moves_state;
  LaunchWork work;
  std::array<ArrayUse, kRequestArrays.size()> arrays; // in kRequestArrays order
};

namespace launch_kind_detail {
using enum ArrayUse;
// Columns: idx_mapping, num_accepted, state_idx, num_scheduled, num_computed, num_draft,
// new_num_computed, query_start_loc, src_col, token_bias, num_accepted_out.
inline constexpr std::array<ArrayUse, kRequestArrays.size()> kSaveV2Arrays{
    read, updated, read, unused, unused, unused, read, unused, unused, unused, unused};
inline constexpr std::array<ArrayUse, kRequestArrays.size()> kPrecopyV2Arrays{
    read, unused, read, unused, unused, unused, unused, unused, read, read, unused};
inline constexpr std::array<ArrayUse, kRequestArrays.size()> kPrecopyV1Arrays{
    unused, unused, read, unused, unused, unused, unused, unused, read, read, unused};
inline constexpr std::array<LaunchKindInfo, 8> kLaunchKinds{{
    {LaunchKind::postprocess,
     "postprocess",
     false,
     false,
     true,
     LaunchWork::batch_rows,
     {unused, read, read, read, read, read, unused, unused, unused, unused, written_or_empty}},
    {LaunchKind::postprocess_align, "postprocess_align", true, false, true, LaunchWork::batch_rows,
     kSaveV2Arrays},
    {LaunchKind::precopy, "precopy", true, false, true, LaunchWork::batch_rows, kPrecopyV2Arrays},
    {LaunchKind::preprocess_align,
     "preprocess_align",
     true,
     false,
     false,
     LaunchWork::batch_rows,
     {read, updated, updated, unused, read, unused, unused, read, written, written, unused}},
    {LaunchKind::batch_copy, "batch_copy", false, false, true, LaunchWork::copy_plan,
     kPrecopyV1Arrays},
    {LaunchKind::precopy_v1, "precopy_v1", false, false, true, LaunchWork::batch_rows,
     kPrecopyV1Arrays},
    {LaunchKind::postprocess_align_slot_tables, "postprocess_align_slot_tables", true, true, true,
     LaunchWork::batch_rows, kSaveV2Arrays},
    {LaunchKind::precopy_slot_tables, "precopy_slot_tables", true, true, true,
     LaunchWork::batch_rows, kPrecopyV2Arrays},
}};
} // namespace launch_kind_detail
using launch_kind_detail::kLaunchKinds;

const LaunchKindInfo& launch_kind_info(LaunchKind kind);

// Throws InputError ("launch KIND: ...") when the case is not well formed: negative counts,
// arenas that do not match the layout, block tables of the wrong count or shape or with fewer
// rows than batch rows (or, for per-slot tables, than slots), V1 slots other than rows, an
// idx_mapping slot out of range or shared by two rows (a LaunchInputError naming idx_mapping), a
// used array of the wrong length.
void validate_launch_shape(const LaunchCase& launch);
// The same checks but the arenas': for a caller whose arenas live elsewhere (device arenas
// made from the layout).
void validate_launch_arrays(const LaunchCase& launch);

} // namespace mc::model
