// The coverage catalogue, counts, report forms and requirements (coverage.h).
#include "model/coverage.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace mc::model {
namespace {

using F = CoverageFeatureId;

constexpr bool names_unique() {
  for (std::size_t i = 0; i < kCoverageFeatureCount; ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (kCoverageCatalogue[i].name == kCoverageCatalogue[j].name) return false;
  return true;
}
static_assert(names_unique());
static_assert(std::ranges::all_of(kCoverageCatalogue,
                                  [](const CoverageFeature& f) { return f.kernel || f.engine; }));

// The launch features are in LaunchKind's order and the row features in RowFeature's (a unit
// test checks that the names agree).
constexpr std::size_t index(CoverageFeatureId id) {
  return static_cast<std::size_t>(id);
}
static_assert(index(F::launch_precopy_slot_tables) - index(F::launch_postprocess) + 1 ==
              std::size(kAllLaunchKinds));
static_assert(index(F::slot_table_row) - index(F::copy) + 1 == kRowFeatureCount);

CoverageFeatureId id_of(std::string_view name) {
  const CoverageFeature* f = find_coverage_feature(name);
  MC_ASSERT(f != nullptr);
  return f->id;
}

std::string valid_names() {
  std::string out;
  for (const CoverageFeature& f : kCoverageCatalogue)
    out += fmt::format("{}{}", out.empty() ? "" : ", ", f.name);
  return out;
}

} // namespace

std::string_view to_string(CoverageLevel level) {
  return level == CoverageLevel::kernel ? "kernel" : "engine";
}

const CoverageFeature* find_coverage_feature(std::string_view name) {
  const auto* f = std::ranges::find(kCoverageCatalogue, name, &CoverageFeature::name);
  return f == kCoverageCatalogue.end() ? nullptr : f;
}

const CoverageFeature& coverage_feature(LaunchKind kind) {
  return kCoverageCatalogue[index(F::launch_postprocess) + static_cast<std::size_t>(kind)];
}

const CoverageFeature& coverage_feature(RowFeature feature) {
  return kCoverageCatalogue[index(F::copy) + static_cast<std::size_t>(feature)];
}

Coverage Coverage::empty(CoverageLevel level) {
  Coverage c{.level = level};
  for (const CoverageFeature& f : kCoverageCatalogue)
    if (f.counted_at(level)) c.counts.emplace(std::string(f.name), 0);
  return c;
}

void Coverage::add(CoverageFeatureId feature, std::int64_t n) {
  const CoverageFeature& f = coverage_feature(feature);
  MC_ASSERT(f.counted_at(level));
  MC_ASSERT(n >= 0);
  counts[std::string(f.name)] += n;
}

void Coverage::merge(const Coverage& other) {
  MC_ASSERT(other.level == level);
  for (const auto& [name, n] : other.counts)
    add(id_of(name), n);
  for (const auto& [a, n] : other.decode_crossings_by_accepted)
    decode_crossings_by_accepted[a] += n;
}

std::int64_t Coverage::count(std::string_view feature) const {
  const auto it = counts.find(feature);
  return it == counts.end() ? 0 : it->second;
}

std::int64_t Coverage::features() const {
  return std::count_if(kCoverageCatalogue.begin(), kCoverageCatalogue.end(),
                       [this](const CoverageFeature& f) { return f.counted_at(level); });
}

std::int64_t Coverage::reached() const {
  return std::count_if(counts.begin(), counts.end(), [](const auto& e) { return e.second > 0; });
}

void count_launch(Coverage& coverage, const LaunchFacts& launch) {
  coverage.add(coverage_feature(launch.kind).id);
  std::array<std::int64_t, kRowFeatureCount> rows{};
  for (const RowFeatureMask m : row_features(launch))
    for (std::size_t f = 0; f < kRowFeatureCount; ++f)
      rows[f] += (m >> f) & 1U;
  for (std::size_t f = 0; f < kRowFeatureCount; ++f) {
    const CoverageFeature& feature = coverage_feature(static_cast<RowFeature>(f));
    if (feature.counted_at(coverage.level)) coverage.add(feature.id, rows[f]);
  }
}

nlohmann::ordered_json to_json(const Coverage& c) {
  nlohmann::ordered_json features = nlohmann::ordered_json::object();
  for (const CoverageFeature& f : kCoverageCatalogue)
    if (f.counted_at(c.level)) features[std::string(f.name)] = c.count(f.name);
  nlohmann::ordered_json j{{"level", to_string(c.level)},
                           {"features_reached", c.reached()},
                           {"features", c.features()},
                           {"counts", std::move(features)}};
  if (c.level == CoverageLevel::engine) {
    nlohmann::ordered_json by_a = nlohmann::ordered_json::object();
    for (const auto& [a, n] : c.decode_crossings_by_accepted)
      by_a[std::to_string(a)] = n;
    j["decode_crossings_by_accepted"] = std::move(by_a);
  }
  return j;
}

Coverage coverage_from_json(const nlohmann::ordered_json& j) {
  const std::string level = j.at("level").get<std::string>();
  Coverage c = Coverage::empty(level == "engine" ? CoverageLevel::engine : CoverageLevel::kernel);
  for (const auto& [name, n] : j.at("counts").items())
    c.add(id_of(name), n.get<std::int64_t>());
  if (j.contains("decode_crossings_by_accepted"))
    for (const auto& [a, n] : j.at("decode_crossings_by_accepted").items())
      c.decode_crossings_by_accepted[std::stoi(a)] = n.get<std::int64_t>();
  return c;
}

std::string coverage_table(const Coverage& c) {
  constexpr std::size_t kPerLine = 3;
  std::string out = fmt::format("coverage, {} level: {} of {} features reached\n",
                                to_string(c.level), c.reached(), c.features());
  std::string_view group;
  std::size_t on_line = 0;
  std::vector<std::string_view> never;
  for (const CoverageFeature& f : kCoverageCatalogue) {
    if (!f.counted_at(c.level)) continue;
    if (f.group != group || on_line == kPerLine) {
      if (on_line > 0) out += "\n";
      out += fmt::format("  {:<9}", f.group != group ? f.group : "");
      group = f.group;
      on_line = 0;
    }
    const std::int64_t n = c.count(f.name);
    if (n == 0) never.push_back(f.name);
    out += fmt::format(" {:>30} {:>7}", f.name, n == 0 ? std::string("NEVER") : std::to_string(n));
    ++on_line;
  }
  if (on_line > 0) out += "\n";
  if (!c.decode_crossings_by_accepted.empty()) {
    std::string by_a;
    for (const auto& [a, n] : c.decode_crossings_by_accepted)
      by_a += fmt::format(" a={}:{}", a, n);
    out += fmt::format("  decodes reaching a boundary by accepted count:{}\n", by_a);
  }
  if (!never.empty()) out += fmt::format("  never reached: {}\n", fmt::join(never, ", "));
  return out;
}

CoverageRequirement parse_coverage_requirement(const std::vector<std::string>& values) {
  CoverageRequirement r;
  for (const std::string& value : values) {
    std::size_t from = 0;
    while (from <= value.size()) {
      const std::size_t comma = std::min(value.find(',', from), value.size());
      const std::string name = value.substr(from, comma - from);
      from = comma + 1;
      if (name == "all") {
        r.all = true;
      } else if (name == "none") {
        continue; // a command that requires coverage by default (gate) told not to
      } else if (find_coverage_feature(name) == nullptr) {
        fail_input("--require-coverage: no feature named '{}'; expected all, none or one of: {}",
                   name, valid_names());
      } else if (std::find(r.features.begin(), r.features.end(), name) == r.features.end()) {
        r.features.push_back(name);
      }
    }
  }
  return r;
}

void check_requirement_levels(const CoverageRequirement& required,
                              std::span<const CoverageLevel> levels) {
  for (const std::string& name : required.features) {
    const CoverageFeature* f = find_coverage_feature(name);
    MC_ASSERT(f != nullptr);
    if (std::none_of(levels.begin(), levels.end(),
                     [f](CoverageLevel l) { return f->counted_at(l); }))
      fail_input("--require-coverage: '{}' is counted at the {} level only, which this run "
                 "does not run",
                 name, f->kernel ? "kernel" : "engine");
  }
}

std::vector<std::string> missing_coverage(const CoverageRequirement& required, const Coverage& c) {
  std::vector<std::string> out;
  for (const CoverageFeature& f : kCoverageCatalogue) {
    if (!f.counted_at(c.level)) continue;
    const bool wanted =
        required.all || std::find(required.features.begin(), required.features.end(), f.name) !=
                            required.features.end();
    if (wanted && c.count(f.name) == 0) out.emplace_back(f.name);
  }
  return out;
}

} // namespace mc::model
