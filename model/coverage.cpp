// The coverage catalogue, counts, report forms and requirements (coverage.h).
#include "model/coverage.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace mc::model {
namespace {

constexpr bool K = true;
constexpr bool E = true;
constexpr bool no = false;

// The features whose names model/launch_features.h also gives a row: the kernel level counts
// rows by them; the engine level counts the rows of its own launches by those it can reach.
constexpr std::array kCatalogue = {
    CoverageFeature{"launch-postprocess", "launches", K, E, "V1 fused postprocess launches"},
    CoverageFeature{"launch-postprocess_align", "launches", K, E, "V2 postprocess launches"},
    CoverageFeature{"launch-precopy", "launches", K, E, "precopy launches (V2 and fused V1)"},
    CoverageFeature{"launch-preprocess_align", "launches", K, E, "V2 preprocess launches"},
    CoverageFeature{"launch-batch_copy", "launches", K, E, "V1 flat copy-plan launches"},
    CoverageFeature{"launch-precopy_v1", "launches", K, E,
                    "V1 fused precopy launches without idx_mapping (vLLM's V1 path today)"},
    CoverageFeature{"launch-postprocess_align_slot_tables", "launches", K, E,
                    "V2 postprocess launches whose tables are found by slot (#55506)"},
    CoverageFeature{"launch-precopy_slot_tables", "launches", K, E,
                    "V2 precopy launches whose tables are found by slot (#55506)"},
    CoverageFeature{"copy", "rows", K, E, "rows with at least one state copy"},
    CoverageFeature{"no-copy", "rows", K, E, "rows with no copy"},
    CoverageFeature{"same-block-shift", "rows", K, E,
                    "rows whose copy reads and writes one block (memmove order)"},
    CoverageFeature{"aliased-columns", "rows", K, no,
                    "rows whose read and written columns differ but hold one block"},
    CoverageFeature{"resets-accepted", "rows", K, no,
                    "rows whose num_accepted was reset to 1 (src == dst save, V2 column change)"},
    CoverageFeature{"skipped-row", "rows", K, no, "V2 rows with idx_mapping -1"},
    CoverageFeature{"null-source", "rows", K, no, "rows whose copy reads the null block"},
    CoverageFeature{"pad-slots", "rows", K, no, "rows whose table holds pad slots (-1)"},
    CoverageFeature{"ds-bias", "rows", K, E, "rows copying a DS conv state with a token bias"},
    CoverageFeature{"offset-past-4GiB", "rows", K, no,
                    "rows whose copy touches a block past 2^32 bytes of its arena"},
    CoverageFeature{"shared-page", "rows", K, E,
                    "rows copying a state that shares its page with other states"},
    CoverageFeature{"slot-table-row", "rows", K, E,
                    "copying rows whose per-slot table row (their slot) is not their batch row"},
    CoverageFeature{"preemption", "scheduler", no, E, "requests preempted (preempted_req_ids)"},
    CoverageFeature{"resume-after-accepted-drafts", "scheduler", no, E,
                    "resumed requests whose last step before preemption accepted drafts"},
    CoverageFeature{"resume-without-accepted-drafts", "scheduler", no, E,
                    "resumed requests whose last step accepted no draft"},
    CoverageFeature{"resume-after-reset", "scheduler", no, E,
                    "resumed requests force-preempted by reset_prefix_cache"},
    CoverageFeature{"reset", "scheduler", no, E, "steps with reset_prefix_cache"},
    CoverageFeature{"abort", "scheduler", no, E, "requests aborted"},
    CoverageFeature{"prefix-hit-none", "scheduler", no, E,
                    "new or resumed requests that start from nothing computed"},
    CoverageFeature{"prefix-hit-1-block", "scheduler", no, E,
                    "new or resumed requests with a prefix hit of one block"},
    CoverageFeature{"prefix-hit-several-blocks", "scheduler", no, E,
                    "new or resumed requests with a prefix hit of two or more blocks"},
    CoverageFeature{"prefill-crosses-0", "chunks", no, E,
                    "prefill chunks that reach no block boundary"},
    CoverageFeature{"prefill-crosses-1", "chunks", no, E,
                    "prefill chunks that reach one block boundary"},
    CoverageFeature{"prefill-crosses-several", "chunks", no, E,
                    "prefill chunks that reach two or more block boundaries"},
    CoverageFeature{"decode-crosses-no-drafts", "chunks", no, E,
                    "decodes without drafts that reach a block boundary"},
    CoverageFeature{"decode-crosses-none-accepted", "chunks", no, E,
                    "decodes with drafts, none accepted, that reach a block boundary"},
    CoverageFeature{"decode-crosses-some-accepted", "chunks", no, E,
                    "decodes with some but not all drafts accepted that reach a block boundary"},
    CoverageFeature{"decode-crosses-all-accepted", "chunks", no, E,
                    "decodes with every draft accepted that reach a block boundary"},
    CoverageFeature{"all-mode-decode", "runner", no, E,
                    "decodes in all mode (written at the block of the last scheduled token)"},
    CoverageFeature{"all-mode-chunk-mid-block", "runner", no, E,
                    "prefill chunks in all mode that start mid-block"},
    CoverageFeature{"all-mode-record", "runner", no, E,
                    "full decodes in all mode, whose last scheduled block is recorded for the "
                    "next step to read at (postprocess_mamba_all)"},
    CoverageFeature{"v2-slot-reuse", "runner", no, E,
                    "V2 request slots taken by another request than their last"},
    CoverageFeature{"deferred-postprocess-reordered", "runner", no, E,
                    "deferred V2 postprocesses run after another batch order was gathered"},
    CoverageFeature{"async-deferral", "async", no, E,
                    "steps planned while the step before them ran (async scheduling), whose "
                    "acceptance then arrived after the planning"},
    CoverageFeature{"async-rollback", "async", no, E,
                    "running requests planned from an optimistic count (the step in flight's "
                    "drafts taken as accepted) that its rejected drafts rolled back"},
    CoverageFeature{"async-held-free", "async", no, E,
                    "blocks freed while the step in flight could touch them, held back until it "
                    "completed"},
    CoverageFeature{"read-window-entry-0", "forward", no, E,
                    "align-mode rows reading their initial state at entry 0 of their window"},
    CoverageFeature{"read-window-entry-1", "forward", no, E,
                    "decodes reading their initial state at window entry 1 (num_accepted 2)"},
    CoverageFeature{"read-window-entry-2", "forward", no, E,
                    "decodes reading their initial state at window entry 2 (num_accepted 3)"},
    CoverageFeature{"read-window-entry-3-plus", "forward", no, E,
                    "decodes reading their initial state at window entry 3 or later"},
    CoverageFeature{"all-mode-first-scheduled-next-block", "forward", no, E,
                    "all-mode rows whose first scheduled token opens a block "
                    "(block_idx_first_scheduled_token past block_idx_last_computed_token)"},
    CoverageFeature{"all-mode-intermediate-states", "forward", no, E,
                    "all-mode rows writing block-aligned states before the block of their last "
                    "scheduled token"},
    CoverageFeature{"graph-replay", "forward", no, E,
                    "decode-only steps run as the CUDA graph of their batch size"},
    CoverageFeature{"graph-padded-rows", "forward", no, E,
                    "CUDA-graph steps with padding rows past their decodes (null block)"},
};

std::string valid_names() {
  std::string out;
  for (const CoverageFeature& f : kCatalogue)
    out += fmt::format("{}{}", out.empty() ? "" : ", ", f.name);
  return out;
}

} // namespace

std::string_view to_string(CoverageLevel level) {
  return level == CoverageLevel::kernel ? "kernel" : "engine";
}

std::span<const CoverageFeature> coverage_catalogue() {
  return kCatalogue;
}

const CoverageFeature* find_coverage_feature(std::string_view name) {
  for (const CoverageFeature& f : kCatalogue)
    if (f.name == name) return &f;
  return nullptr;
}

Coverage Coverage::empty(CoverageLevel level) {
  Coverage c{.level = level};
  for (const CoverageFeature& f : kCatalogue)
    if (f.counted_at(level)) c.counts.emplace(std::string(f.name), 0);
  return c;
}

void Coverage::add(std::string_view feature, std::int64_t n) {
  const CoverageFeature* f = find_coverage_feature(feature);
  MC_ASSERT(f != nullptr && f->counted_at(level));
  MC_ASSERT(n >= 0);
  counts[std::string(feature)] += n;
}

void Coverage::merge(const Coverage& other) {
  MC_ASSERT(other.level == level);
  for (const auto& [name, n] : other.counts)
    add(name, n);
  for (const auto& [a, n] : other.decode_crossings_by_accepted)
    decode_crossings_by_accepted[a] += n;
}

std::int64_t Coverage::count(std::string_view feature) const {
  const auto it = counts.find(feature);
  return it == counts.end() ? 0 : it->second;
}

std::int64_t Coverage::features() const {
  return std::count_if(kCatalogue.begin(), kCatalogue.end(),
                       [this](const CoverageFeature& f) { return f.counted_at(level); });
}

std::int64_t Coverage::reached() const {
  return std::count_if(counts.begin(), counts.end(), [](const auto& e) { return e.second > 0; });
}

void count_launch(Coverage& coverage, const LaunchFacts& launch) {
  coverage.add(fmt::format("launch-{}", to_string(launch.kind)));
  std::array<std::int64_t, kRowFeatureCount> rows{};
  for (const RowFeatureMask m : row_features(launch))
    for (std::size_t f = 0; f < kRowFeatureCount; ++f)
      rows[f] += (m >> f) & 1U;
  for (std::size_t f = 0; f < kRowFeatureCount; ++f) {
    const std::string_view name = to_string(static_cast<RowFeature>(f));
    if (find_coverage_feature(name)->counted_at(coverage.level)) coverage.add(name, rows[f]);
  }
}

nlohmann::ordered_json to_json(const Coverage& c) {
  nlohmann::ordered_json features = nlohmann::ordered_json::object();
  for (const CoverageFeature& f : kCatalogue)
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
    c.add(name, n.get<std::int64_t>());
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
  for (const CoverageFeature& f : kCatalogue) {
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
  for (const CoverageFeature& f : kCatalogue) {
    if (!f.counted_at(c.level)) continue;
    const bool wanted =
        required.all || std::find(required.features.begin(), required.features.end(), f.name) !=
                            required.features.end();
    if (wanted && c.count(f.name) == 0) out.emplace_back(f.name);
  }
  return out;
}

} // namespace mc::model
