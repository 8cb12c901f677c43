// Case files: one kernel launch (LaunchCase) and its result (LaunchResult) as a directory
// of case.json plus .npy arrays, readable by numpy as they are (CASE_FORMAT.md).
//
//   <dir>/case.json              format, config, layout spec + derived tensors, launch geometry
//   <dir>/block_table_<g>.npy    int32 [num_rows, row_stride] per group (gap columns included)
//   <dir>/<array>.npy            int32, each non-empty per-request array
//   <dir>/arena_<i>.npy          uint8 [num_blocks, page_bytes] per arena
//   <dir>/expected/result.json   status, unsupported_reason, decisions (optional)
//   <dir>/expected/<array>.npy, arena_<i>.npy   the arrays and arenas after the launch
//
// Loading checks structure and sizes (every field, type, dtype, shape and length) and
// throws InputError naming the file and field; the contents (a block id outside the arena,
// a column outside the row) are the oracle's to check when it runs the case, and fail_in_case
// names the .npy files that hold what it refused.
#pragma once

#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace mc::model {

struct LaunchInputError;

inline constexpr std::string_view kCaseFormatName = "mambacheck-case";
inline constexpr std::string_view kResultFormatName = "mambacheck-result";
inline constexpr std::int32_t kCaseFormatVersion = 1;
inline constexpr std::string_view kResultDirName = "expected";

// Limits on what a case file may declare (STYLE.md).
inline constexpr std::int32_t kCaseReqsMax = 1 << 20;      // num_reqs, num_slots
inline constexpr std::int32_t kCaseTableColsMax = 1 << 20; // row_width, row_stride
inline constexpr std::int64_t kCaseTableElementsMax = std::int64_t{1} << 28; // per table
inline constexpr std::int64_t kCaseFamilyParamMax = 1 << 16; // every FamilyParams field
inline constexpr std::int64_t kCasePageAlignMax = std::int64_t{1} << 30;
inline constexpr std::int64_t kCaseArenaBytesMax = std::int64_t{1} << 42; // all arenas together
inline constexpr std::int64_t kCaseJsonBytesMax = std::int64_t{1} << 28;
inline constexpr std::int32_t kCaseJsonDepthMax = 32;

// Writes case.json, the block tables, the non-empty per-request arrays and the arenas into
// `dir` (created if needed). A `dir/expected/` left from an earlier case is removed. The
// case must be well formed (arenas and tables sized by its layout): asserted.
void save_case(const LaunchCase& launch_case, const std::filesystem::path& dir);

// The layout part of case.json as one JSON object text: {"config": ..., "layout": ...,
// "metadata": ...}, the fields a case directory's reader takes its geometry from (an external
// worker's engine session is opened with it: backends/external_engine.h).
std::string case_layout_json(const Layout& layout);

// The config and a group spec as case.json writes them; the trace header writes them the same
// (scenarios/FORMAT.md). A group's FamilyParams are written whole, or (ZeroParams::left_out, the
// trace's way) without the fields that are 0, which read back as 0.
enum class ZeroParams : std::uint8_t { written, left_out };
nlohmann::ordered_json config_json(const CacheConfig& config);
nlohmann::ordered_json group_json(const GroupSpec& group, ZeroParams zero_params);

// Reads and checks a case directory; throws InputError naming the file and field.
LaunchCase load_case(const std::filesystem::path& dir);

// Writes `result` into `dir/expected/` next to a case saved there (its case.json gives
// the arena geometry). Throws InputError when dir holds no valid case or the result does
// not fit it (arena count or sizes, array lengths).
void save_result(const LaunchResult& result, const std::filesystem::path& dir);

// Reads `dir/expected/`, checked against `dir/case.json` (array lengths, arena sizes, one
// decision at most per (batch row, tensor)); throws InputError naming the file and field.
LaunchResult load_result(const std::filesystem::path& dir);

// Whether `dir/expected/result.json` exists.
bool has_result(const std::filesystem::path& dir);

// An invalid value found in the case loaded from `dir` (by the oracle's run of it), as an
// InputError naming the directory and the .npy files of the arrays it came from:
// "DIR: src_col.npy: launch batch_copy: request row 3 (slot 3), ...".
[[noreturn]] void fail_in_case(const std::filesystem::path& dir, const LaunchInputError& error);

} // namespace mc::model
