// Coverage: which cases of the reference design a campaign or a run actually exercised, and how
// often. A held campaign of 20,000 cases says nothing by itself about whether any of them
// preempted a request with accepted drafts or copied a DS conv state with a bias; these counts
// do. They are taken from what ran (the oracle's decisions, arrays and step records), never
// from what a generator meant to draw.
//
// The catalogue is fixed: model/coverage_features.def gives each feature its enum (what counting
// sites name), its name, a group for the table and the levels that count it. The kernel level
// counts launches (one per case) and batch rows by their features (model/launch_features.h);
// the engine level counts scheduler and runner events per step and row, and the launches of its
// steps. `--require-coverage` names features (or `all`, every feature of the levels that ran)
// that must have been reached.
#pragma once

#include "model/launch_features.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

enum class CoverageLevel : std::uint8_t { kernel, engine };
std::string_view to_string(CoverageLevel level);

enum class CoverageFeatureId : std::uint8_t {
#define X(id, name, group, kernel, engine, what, knobs, draw) id,
#include "model/coverage_features.def"
#undef X
};

struct CoverageFeature {
  static constexpr bool K = true, E = true, no = false; // the level columns of the .def
  CoverageFeatureId id;
  std::string_view name;
  std::string_view group; // a line of the table: launches, rows, scheduler, chunks, runner
  bool kernel = false;    // counted by the kernel level
  bool engine = false;    // counted by the engine level
  std::string_view what;  // one line for --help and the docs
  constexpr bool counted_at(CoverageLevel level) const {
    return level == CoverageLevel::kernel ? kernel : engine;
  }
};

// Every feature, in table order: entry i is CoverageFeatureId(i).
inline constexpr std::array kCoverageCatalogue = {
#define X(id, name, group, kernel, engine, what, knobs, draw)                                      \
  CoverageFeature{CoverageFeatureId::id,   name, #group, CoverageFeature::kernel,                  \
                  CoverageFeature::engine, what},
#include "model/coverage_features.def"
#undef X
};
inline constexpr std::size_t kCoverageFeatureCount = kCoverageCatalogue.size();

constexpr const CoverageFeature& coverage_feature(CoverageFeatureId id) {
  return kCoverageCatalogue[static_cast<std::size_t>(id)];
}
inline std::span<const CoverageFeature> coverage_catalogue() {
  return kCoverageCatalogue;
}
const CoverageFeature* find_coverage_feature(std::string_view name); // null: no such feature

// The launch feature of a kind, and the feature of a row feature: of the same names.
const CoverageFeature& coverage_feature(LaunchKind kind);
const CoverageFeature& coverage_feature(RowFeature feature);

// Counts of one level. Reports list every feature the level counts (0: never reached), so what
// was missed shows as plainly as what was reached.
struct Coverage {
  CoverageLevel level = CoverageLevel::kernel;
  std::map<std::string, std::int64_t, std::less<>> counts;
  // Engine level: decode rows whose accepted tokens reached a block boundary, by accepted count
  // (1 .. 1 + drafts); the features group them into none, some and all drafts accepted.
  std::map<std::int32_t, std::int64_t> decode_crossings_by_accepted;

  static Coverage empty(CoverageLevel level);
  void add(CoverageFeatureId feature, std::int64_t n = 1); // a feature of the level (asserted)
  void merge(const Coverage& other);                       // same level (asserted)
  std::int64_t count(CoverageFeatureId f) const { return count(coverage_feature(f).name); }
  std::int64_t count(std::string_view feature) const; // 0 for a name of no feature
  std::int64_t features() const;                      // features the level counts
  std::int64_t reached() const;                       // of those, features with a count above 0
};

// One launch: its kind, and each batch row by every feature of the row that `coverage`'s level
// counts.
void count_launch(Coverage& coverage, const LaunchFacts& launch);

// Deterministic: catalogue order, plus the decode histogram at the engine level.
nlohmann::ordered_json to_json(const Coverage& coverage);
Coverage coverage_from_json(const nlohmann::ordered_json& j);

// A compact table, a few features a line, each never-reached feature marked NEVER, and a last
// line listing them.
std::string coverage_table(const Coverage& coverage);

// `--require-coverage` values: feature names, comma lists of them, `all`, or `none` (nothing
// more: for a command that requires coverage by default).
struct CoverageRequirement {
  bool all = false;
  std::vector<std::string> features; // named ones, in the order given, without repeats
  bool empty() const { return !all && features.empty(); }
};

// Throws InputError, one line naming the unknown feature and listing every valid one.
CoverageRequirement parse_coverage_requirement(const std::vector<std::string>& values);

// Throws InputError when a named feature is counted by none of `levels` (one line: which level
// counts it).
void check_requirement_levels(const CoverageRequirement& required,
                              std::span<const CoverageLevel> levels);

// The required features of `coverage`'s level that it never reached, in catalogue order.
std::vector<std::string> missing_coverage(const CoverageRequirement& required,
                                          const Coverage& coverage);

} // namespace mc::model
