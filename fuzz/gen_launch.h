// Launch-case generators: small copyable specs that RapidCheck can generate and shrink,
// and the deterministic step that turns a spec into a LaunchCase with arenas.
//
// A LaunchCase owns arenas (move-only, possibly many GiB of lazily mapped bytes), so
// RapidCheck generates a LaunchSpec instead: the config, the layout spec, the launch
// kind, the block tables and per-request arrays, and a seed for the arena contents.
// materialize() builds the layout, poisons every block that a block table references and its
// neighbours, and fills those referenced blocks with seeded pseudo-random bytes (natural bytes
// only, so page padding stays poison and a copy of the page stride shows); the rest of an arena
// stays unmapped zero.
//
// Every generated spec is valid per model/LAUNCH_KINDS.md ("Validity"): the generator
// first chooses each row's decision outcome (copy, same-column reset, same-block shift,
// no copy, skip) and derives the counters from it, then gives every row private
// physical blocks for what it writes; blocks shared between rows (prefix hits, the
// null block) are only ever read. Shrinking moves toward fewer requests, fewer groups
// and layers, smaller parameters and plain tables.
#pragma once

#include "model/block_table.h"
#include "model/config.h"
#include "model/launch.h"
#include "model/layout.h"

#include <nlohmann/json_fwd.hpp>
#include <rapidcheck.h>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mc::fuzz {

// The sizing class of a generated case; chosen with weights (GenOptions::weights).
enum class SizeClass : std::uint8_t {
  tiny,        // a few bytes per state, 1..few requests and layers: fast shrinking
  small,       // up to tens of requests and layers, small states
  wide_states, // realistic state sizes (KiB per block), few layers and requests
  grid,        // production-like grids: tens of layers, hundreds of requests, tiny states
  big_offset,  // a sparse arena > 4 GiB whose used blocks sit past byte 2^32 (class B)
};
inline constexpr SizeClass kAllSizeClasses[] = {SizeClass::tiny, SizeClass::small,
                                                SizeClass::wide_states, SizeClass::grid,
                                                SizeClass::big_offset};
std::string_view to_string(SizeClass size_class);

struct LaunchSpec {
  model::CacheConfig config;
  model::LayoutSpec layout_spec;
  model::LaunchKind kind = model::LaunchKind::postprocess;
  std::int32_t num_reqs = 0;  // batch rows
  std::int32_t num_slots = 0; // per-slot array length (== num_reqs for V1 kinds)
  model::BlockTables block_tables;
  model::RequestArrays requests;
  std::uint64_t fill_seed = 0; // arena contents of referenced blocks
  SizeClass size_class = SizeClass::tiny;
};

// Field-wise equality (model's config and layout structs define none).
bool operator==(const LaunchSpec& a, const LaunchSpec& b);

// Relative weights of the size classes; a class is only drawn once RapidCheck's size
// parameter reaches its threshold (wide_states 30, grid and big_offset 50), so small
// sizes stay tiny and shrink fast.
struct ClassWeights {
  int tiny = 40;
  int small = 35;
  int wide_states = 10;
  int grid = 12;
  int big_offset = 3;
};

// Relative weights of what a postprocess row decides (gen_rows.h): the counters are derived
// from the outcome drawn.
struct SaveRowWeights {
  int no_copy = 30;     // the accepted tokens stay inside the running block
  int copy = 45;        // a copy src_col -> dst_col
  int same_column = 25; // src == dst: the reset of num_accepted, a same-block shift if bias > 0
  // src == dst with bias >= 1 (a >= 2, where the config has drafts): the reset and a
  // same-block shift in one row, the row whose programs race on num_accepted in the seed.
  int same_column_shift = 0;
};

// Relative weights of the variant each (group, row) of a block table gets (gen_tables.h).
struct TableVariantWeights {
  int plain = 45;
  int alias_conv = 15;     // dst aliases the conv source block (a same-block shift)
  int alias_temporal = 10; // dst aliases the temporal source block
  int null_read = 10;      // the source is the null block
  int shared_read = 10;    // the source is a prefix block shared read-only with other rows
  int prefix_dup = 10;     // a shared prefix block before the row's own, a column repeated
};

struct GenOptions {
  // Empty: all five kinds. Drawn uniformly from the list, so a kind listed twice is drawn
  // twice as often.
  std::vector<model::LaunchKind> kinds;
  ClassWeights weights;
  SaveRowWeights save_rows;
  TableVariantWeights tables;
  std::int32_t num_spec_min = 0;    // draft tokens per request at least (a drawn count is raised)
  std::int32_t grid_layers_min = 8; // grid: total layers over all groups
  std::int32_t grid_layers_max = 64;
  std::int32_t grid_reqs_min = 32; // grid: batch rows
  std::int32_t grid_reqs_max = 256;
  // The arenas of a case stay under this (except big_offset cases, sparse arenas past 4 GiB),
  // so a case's arenas and the rerun of a finding stay cheap.
  std::int64_t arena_bytes_max = std::int64_t{16} << 20;
  // random_launch_spec only: the size parameter (0..100); -1 derives it from the seed.
  int random_size = -1;

  // Defaults for CI runs (oracle vs host): every kind and class, big offsets rare.
  static GenOptions host_default();
  // GPU runs: every case a grid of >= 64 layers x >= 2 states x >= 256 requests.
  static GenOptions gpu_grid();
  // Every case a big_offset case (arena > 4 GiB, block offsets past 2^32).
  static GenOptions big_offsets();
  // Race hunting on the GPU: production-size grids whose every request is copied by many
  // programs (>= 64 layers x >= 2 states, 256..512 requests, every postprocess row crossing
  // a block, most of them a same-column reset with a same-block shift), tables rich in
  // aliased and shared blocks, postprocess_align drawn most often.
  static GenOptions races();
};

// Every field as JSON and back: how a campaign tells its case workers to draw its cases.
nlohmann::json to_json(const GenOptions& options);
// The names of `kinds` (model::to_string), in their order.
std::vector<std::string> kind_names(const std::vector<model::LaunchKind>& kinds);
GenOptions gen_options_from_json(const nlohmann::json& j);

// The preset named `focus` ("default", "gpu-grid", "big-offsets", "races"), for command
// lines; nullopt for any other name.
std::optional<GenOptions> gen_options_named(std::string_view focus);
inline constexpr std::string_view kGenFocusNames = "default, gpu-grid, big-offsets or races";

// RapidCheck generator of valid specs; sizes scale with the size parameter.
rc::Gen<LaunchSpec> gen_launch_spec(const GenOptions& options);

// The same generator driven by a fixed rc::Random(seed) at size options.random_size
// (or seed % 101): deterministic, for campaigns and case exports.
LaunchSpec random_launch_spec(std::uint64_t seed, const GenOptions& options);

// Where materialize's time goes (for `mambacheck bench --cases`).
struct MaterializeTimes {
  double arenas_seconds = 0.0; // mapping the arenas and poisoning them
  double fill_seconds = 0.0;   // the seeded bytes of the referenced blocks
};

// Builds layout and arenas; same spec, same bytes. `times`, when given, gets its time added.
model::LaunchCase materialize(const LaunchSpec& spec, MaterializeTimes* times = nullptr);

// One paragraph for reports: kind, config, layout, sizes, and for small cases the arrays.
std::string describe(const LaunchSpec& spec);

// RapidCheck prints counterexamples through this (found by ADL).
void showValue(const LaunchSpec& spec, std::ostream& os);

} // namespace mc::fuzz
