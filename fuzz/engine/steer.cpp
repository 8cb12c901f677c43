// The knob table and the boost rule (steer.h).
#include "fuzz/engine/steer.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::fuzz {
namespace {

constexpr std::array<std::string_view, kSteerKnobCount> kKnobNames = {
    "all-mode",        "async",      "drafts",          "no-drafts",     "full-drafts",
    "rejected-drafts", "tight-pool", "shared-prefixes", "long-prompts",  "big-blocks",
    "ds-layout",       "v1-runner",  "v2-runner",       "batch-copy",    "precopy-v1",
    "slot-tables",     "deferred",   "mixed-preset",    "reset",         "abort",
    "wide-batches",    "follow-ups", "padded-tails",    "partial-hashes"};
static_assert(static_cast<std::size_t>(SteerKnob::partial_hashes) + 1 == kSteerKnobCount);

// By feature: the knobs column of model/coverage_features.def.
constexpr std::array<SteerKnobs, model::kCoverageFeatureCount> kKnobs = [] {
  using enum SteerKnob;
  return std::array<SteerKnobs, model::kCoverageFeatureCount>{
#define MC_STEER_KNOBS(...) __VA_ARGS__
#define X(id, name, group, kernel, engine, what, knobs, draw) SteerKnobs{MC_STEER_KNOBS knobs},
#include "model/coverage_features.def"
#undef X
#undef MC_STEER_KNOBS
  };
}();

constexpr bool knobs_where_engine() {
  for (const model::CoverageFeature& f : model::kCoverageCatalogue)
    if (kKnobs[static_cast<std::size_t>(f.id)][0].has_value() != f.engine) return false;
  return true;
}
static_assert(knobs_where_engine(), "an engine-level feature needs a knob, another none");

// A knob no feature names is never boosted.
constexpr bool every_knob_used() {
  std::array<bool, kSteerKnobCount> used{};
  for (const SteerKnobs& knobs : kKnobs)
    for (const std::optional<SteerKnob>& k : knobs)
      if (k) used[static_cast<std::size_t>(*k)] = true;
  return std::ranges::all_of(used, [](bool u) { return u; });
}
static_assert(every_knob_used());

constexpr std::array<std::string_view, 3> kBoostNames = {"none", "rare", "missing"};

} // namespace

std::string_view to_string(SteerKnob knob) {
  return kKnobNames[static_cast<std::size_t>(knob)];
}

std::optional<SteerKnob> find_steer_knob(std::string_view name) {
  for (std::size_t k = 0; k < kSteerKnobCount; ++k)
    if (kKnobNames[k] == name) return static_cast<SteerKnob>(k);
  return std::nullopt;
}

bool SteerBoosts::any() const {
  return std::any_of(knobs.begin(), knobs.end(),
                     [](SteerBoost b) { return b != SteerBoost::none; });
}

const SteerKnobs& steer_knobs(model::CoverageFeatureId feature) {
  return kKnobs[static_cast<std::size_t>(feature)];
}

void SteerTally::add(const model::Coverage& case_coverage) {
  ++cases;
  for (const auto& [name, n] : case_coverage.counts)
    if (n > 0) ++cases_reaching[name];
}

SteerBoosts steer_boosts(const SteerTally& tally) {
  SteerBoosts out;
  if (tally.cases == 0) return out;
  for (const model::CoverageFeature& f : model::kCoverageCatalogue) {
    if (!f.engine) continue;
    const auto it = tally.cases_reaching.find(f.name);
    const std::int64_t reaching = it == tally.cases_reaching.end() ? 0 : it->second;
    const SteerBoost boost = reaching == 0                              ? SteerBoost::missing
                             : reaching * kSteerRareCases < tally.cases ? SteerBoost::rare
                                                                        : SteerBoost::none;
    for (const std::optional<SteerKnob>& k : steer_knobs(f.id))
      if (k) {
        SteerBoost& b = out.knobs[static_cast<std::size_t>(*k)];
        b = std::max(b, boost);
      }
  }
  return out;
}

std::string to_string(const SteerBoosts& boosts) {
  std::string out;
  for (std::size_t k = 0; k < kSteerKnobCount; ++k)
    if (boosts.knobs[k] != SteerBoost::none)
      out += fmt::format("{}{}={}", out.empty() ? "" : ",", kKnobNames[k],
                         kBoostNames[static_cast<std::size_t>(boosts.knobs[k])]);
  return out;
}

SteerBoosts parse_steer_boosts(std::string_view text) {
  SteerBoosts out;
  std::size_t from = 0;
  while (from < text.size()) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    const std::string_view item = text.substr(from, comma - from);
    from = comma + 1;
    const std::size_t eq = item.find('=');
    const std::optional<SteerKnob> knob =
        find_steer_knob(eq == std::string_view::npos ? item : item.substr(0, eq));
    if (!knob)
      model::fail_input("--steer-boosts: no knob named '{}'; expected KNOB=rare|missing, KNOB one "
                        "of: {}",
                        item.substr(0, eq), fmt::join(kKnobNames, ", "));
    const std::string_view boost =
        eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
    if (boost != "rare" && boost != "missing")
      model::fail_input("--steer-boosts: '{}': expected {}=rare or {}=missing", item,
                        to_string(*knob), to_string(*knob));
    out.knobs[static_cast<std::size_t>(*knob)] =
        boost == "rare" ? SteerBoost::rare : SteerBoost::missing;
  }
  return out;
}

} // namespace mc::fuzz
