// Each launch kind described once, as data: what it decides (its family), when the runner
// launches it (its phase), how it indexes, which per-request arrays it reads and writes, whether
// it moves state, and the shape of its work. model/LAUNCH_KINDS.md is the prose; this table is
// what code walks. The shape checks every consumer makes before it decides anything (arenas,
// block tables, idx_mapping, array lengths) are written here once, from the table, so the
// oracle, the kernels' launcher and the case files agree on what a well-formed case is. What a
// family decides stays with each side (DESIGN.md, the two walls): the oracle and the kernels'
// launcher each pick their own decision from the family and the other columns, never from a
// list of kinds.
//
// A kind that varies an existing one (its indexing, its tables, its unit of work) is an enum
// value (launch.h), one row here and its launch-KIND coverage feature (model/coverage.cpp); only
// a new family, or a column a side does not read yet, needs decision code: in oracle/kinds.cpp,
// in gpu/kernels and in the generator (fuzz/gen_rows.cpp).
#pragma once

#include "model/launch.h"
#include "model/request_arrays.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <iterator>
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

// The decision a kind makes, named for the kind that first made it (LAUNCH_KINDS.md, one
// section each). Kinds of one family decide the same from the same arrays; they differ in the
// other columns only.
enum class LaunchFamily : std::uint8_t {
  postprocess,       // V1 save: running = computed + scheduled - drafts; reset to num_accepted_out
  postprocess_align, // V2 save: running = new_num_computed - a + 1; reset in place
  precopy,           // pre-step copy: src_col -> state_idx with token_bias
  preprocess_align,  // V2 bookkeeping: src_col, token_bias, new state_idx; copies nothing
};

// When the runner launches the kind within an engine step: before the forward (bookkeeping and
// the copy of the state the forward reads) or after it (the save of the state it wrote).
enum class LaunchPhase : std::uint8_t { pre_step, post_step };

std::string_view to_string(LaunchFamily family);
std::string_view to_string(LaunchPhase phase);
std::string_view to_string(LaunchWork work);

// A row of the table leaves out a column that has the common value given here.
struct LaunchKindInfo {
  LaunchKind kind;
  std::string_view name;
  LaunchFamily family;
  LaunchPhase phase;
  // V2 kinds: arrays by slot, idx_mapping[batch row] = slot (-1 skips the row); V1 kinds:
  // slot = batch row, idx_mapping empty and num_slots == num_reqs.
  bool by_slot = false;
  // The block-table row of batch row b: its slot (newer vLLM hands the kernels the
  // per-request-slot tables, #55506; the tables then have a row for every slot) or b itself
  // (the seed: tables gathered in batch order). The same for V1 kinds, whose slot is b.
  bool tables_by_slot = false;
  bool moves_state = true;
  LaunchWork work = LaunchWork::batch_rows;
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
inline constexpr auto kLaunchKinds = std::to_array<LaunchKindInfo>({
    {.kind = LaunchKind::postprocess,
     .name = "postprocess",
     .family = LaunchFamily::postprocess,
     .phase = LaunchPhase::post_step,
     .arrays = {unused, read, read, read, read, read, unused, unused, unused, unused,
                written_or_empty}},
    {.kind = LaunchKind::postprocess_align,
     .name = "postprocess_align",
     .family = LaunchFamily::postprocess_align,
     .phase = LaunchPhase::post_step,
     .by_slot = true,
     .arrays = kSaveV2Arrays},
    {.kind = LaunchKind::precopy,
     .name = "precopy",
     .family = LaunchFamily::precopy,
     .phase = LaunchPhase::pre_step,
     .by_slot = true,
     .arrays = kPrecopyV2Arrays},
    {.kind = LaunchKind::preprocess_align,
     .name = "preprocess_align",
     .family = LaunchFamily::preprocess_align,
     .phase = LaunchPhase::pre_step,
     .by_slot = true,
     .moves_state = false,
     .arrays = {read, updated, updated, unused, read, unused, unused, read, written, written,
                unused}},
    {.kind = LaunchKind::batch_copy,
     .name = "batch_copy",
     .family = LaunchFamily::precopy,
     .phase = LaunchPhase::pre_step,
     .work = LaunchWork::copy_plan,
     .arrays = kPrecopyV1Arrays},
    {.kind = LaunchKind::precopy_v1,
     .name = "precopy_v1",
     .family = LaunchFamily::precopy,
     .phase = LaunchPhase::pre_step,
     .arrays = kPrecopyV1Arrays},
    {.kind = LaunchKind::postprocess_align_slot_tables,
     .name = "postprocess_align_slot_tables",
     .family = LaunchFamily::postprocess_align,
     .phase = LaunchPhase::post_step,
     .by_slot = true,
     .tables_by_slot = true,
     .arrays = kSaveV2Arrays},
    {.kind = LaunchKind::precopy_slot_tables,
     .name = "precopy_slot_tables",
     .family = LaunchFamily::precopy,
     .phase = LaunchPhase::pre_step,
     .by_slot = true,
     .tables_by_slot = true,
     .arrays = kPrecopyV2Arrays},
});
} // namespace launch_kind_detail
using launch_kind_detail::kLaunchKinds;

// The table is kAllLaunchKinds row for row (names are parsed and kinds walked through both),
// and its columns agree with each other.
constexpr bool launch_kind_table_consistent() {
  if (kLaunchKinds.size() != std::size(kAllLaunchKinds)) return false;
  for (std::size_t k = 0; k < kLaunchKinds.size(); ++k) {
    const LaunchKindInfo& info = kLaunchKinds[k];
    if (info.kind != kAllLaunchKinds[k]) return false;
    // idx_mapping is read exactly by the kinds that index by slot.
    if ((info.arrays[0] == ArrayUse::read) != info.by_slot) return false;
    // Bookkeeping is the one family that moves no state.
    if (info.moves_state == (info.family == LaunchFamily::preprocess_align)) return false;
    // A host copy plan is a way to make pre-step copies, not another decision.
    if (info.work == LaunchWork::copy_plan && info.family != LaunchFamily::precopy) return false;
  }
  return true;
}
static_assert(launch_kind_table_consistent());

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
