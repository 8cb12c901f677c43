// The knob table and the boost rule (steer.h).
#include "fuzz/engine/steer.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::fuzz {
namespace {

using K = SteerKnob;

constexpr std::array<std::string_view, kSteerKnobCount> kKnobNames = {
    "all-mode",        "async",      "drafts",          "no-drafts",    "full-drafts",
    "rejected-drafts", "tight-pool", "shared-prefixes", "long-prompts", "big-blocks",
    "ds-layout",       "v1-runner",  "v2-runner",       "batch-copy",   "precopy-v1",
    "slot-tables",     "deferred",   "mixed-preset",    "reset",        "abort",
    "wide-batches"};
static_assert(static_cast<std::size_t>(SteerKnob::wide_batches) + 1 == kSteerKnobCount);

// Every engine-level feature of model/coverage.cpp's catalogue, with the knobs whose choice
// makes it likelier (why, where it is not plain from the names).
constexpr std::array kTable = {
    SteerRow{"launch-postprocess", {K::v1_runner}},
    SteerRow{"launch-postprocess_align", {K::v2_runner}},
    SteerRow{"launch-precopy", {K::v2_runner}},
    SteerRow{"launch-preprocess_align", {K::v2_runner}},
    SteerRow{"launch-batch_copy", {K::v1_runner, K::batch_copy}},
    SteerRow{"launch-precopy_v1", {K::v1_runner, K::precopy_v1}},
    SteerRow{"launch-postprocess_align_slot_tables", {K::v2_runner, K::slot_tables}},
    SteerRow{"launch-precopy_slot_tables", {K::v2_runner, K::slot_tables}},
    // Copies come with block boundaries: drafts cross them on decodes, long prompts on chunks.
    SteerRow{"copy", {K::drafts, K::long_prompts}},
    SteerRow{"no-copy", {K::no_drafts}},
    // A same-column save with a token bias: a decode with drafts.
    SteerRow{"same-block-shift", {K::drafts}},
    SteerRow{"ds-bias", {K::ds_layout, K::drafts}},
    SteerRow{"shared-page", {K::mixed_preset}},
    SteerRow{"slot-table-row", {K::v2_runner, K::slot_tables}},
    SteerRow{"preemption", {K::tight_pool}},
    // The scheduler preempts the newest running request: with a tight pool and every draft
    // accepted, it has decoded with accepted drafts more often.
    SteerRow{"resume-after-accepted-drafts", {K::tight_pool, K::drafts, K::full_drafts}},
    SteerRow{"resume-without-accepted-drafts", {K::tight_pool, K::rejected_drafts}},
    SteerRow{"resume-after-reset", {K::reset, K::tight_pool}},
    SteerRow{"reset", {K::reset}},
    SteerRow{"abort", {K::abort}},
    // A reset empties the prefix cache: the requests after it start from nothing.
    SteerRow{"prefix-hit-none", {K::reset}},
    SteerRow{"prefix-hit-1-block", {K::shared_prefixes}},
    SteerRow{"prefix-hit-several-blocks", {K::shared_prefixes, K::long_prompts}},
    SteerRow{"prefill-crosses-0", {K::big_blocks}},
    SteerRow{"prefill-crosses-1", {K::long_prompts}},
    SteerRow{"prefill-crosses-several", {K::long_prompts}},
    SteerRow{"decode-crosses-no-drafts", {K::no_drafts}},
    SteerRow{"decode-crosses-none-accepted", {K::drafts, K::rejected_drafts}},
    SteerRow{"decode-crosses-some-accepted", {K::drafts, K::rejected_drafts}},
    SteerRow{"decode-crosses-all-accepted", {K::drafts, K::full_drafts}},
    SteerRow{"all-mode-decode", {K::all_mode}},
    SteerRow{"all-mode-chunk-mid-block", {K::all_mode}},
    SteerRow{"all-mode-record", {K::all_mode, K::drafts, K::full_drafts}},
    SteerRow{"v2-slot-reuse", {K::v2_runner}},
    SteerRow{"deferred-postprocess-reordered", {K::v2_runner, K::slot_tables, K::deferred}},
    SteerRow{"async-deferral", {K::async}},
    SteerRow{"async-rollback", {K::async, K::drafts, K::rejected_drafts}},
    // Blocks freed while a step is in flight: preemptions and finished requests.
    SteerRow{"async-held-free", {K::async, K::tight_pool}},
    // A decode reads at entry a - 1: entry 0 after a rejection (or without drafts), entries 1
    // and up after accepted drafts, 3 and up only with three drafts or more.
    SteerRow{"read-window-entry-0", {K::drafts, K::rejected_drafts}},
    SteerRow{"read-window-entry-1", {K::drafts, K::rejected_drafts}},
    SteerRow{"read-window-entry-2", {K::drafts, K::full_drafts}},
    SteerRow{"read-window-entry-3-plus", {K::drafts, K::full_drafts}},
    SteerRow{"all-mode-first-scheduled-next-block", {K::all_mode, K::long_prompts}},
    SteerRow{"all-mode-intermediate-states", {K::all_mode, K::long_prompts}},
    // Decode-only steps: every running request past its prompt; padding needs 3 or more.
    SteerRow{"graph-replay", {K::wide_batches}},
    SteerRow{"graph-padded-rows", {K::wide_batches}},
};

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

std::span<const SteerRow> steer_table() {
  return kTable;
}

const SteerRow* find_steer_row(std::string_view feature) {
  for (const SteerRow& row : kTable)
    if (row.feature == feature) return &row;
  return nullptr;
}

void SteerTally::add(const model::Coverage& case_coverage) {
  ++cases;
  for (const auto& [name, n] : case_coverage.counts)
    if (n > 0) ++cases_reaching[name];
}

SteerBoosts steer_boosts(const SteerTally& tally) {
  SteerBoosts out;
  if (tally.cases == 0) return out;
  for (const SteerRow& row : kTable) {
    const auto it = tally.cases_reaching.find(row.feature);
    const std::int64_t reaching = it == tally.cases_reaching.end() ? 0 : it->second;
    const SteerBoost boost = reaching == 0                              ? SteerBoost::missing
                             : reaching * kSteerRareCases < tally.cases ? SteerBoost::rare
                                                                        : SteerBoost::none;
    for (const std::optional<SteerKnob>& k : row.knobs)
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
    if (boost == "rare")
      out.knobs[static_cast<std::size_t>(*knob)] = SteerBoost::rare;
    else if (boost == "missing")
      out.knobs[static_cast<std::size_t>(*knob)] = SteerBoost::missing;
    else
      model::fail_input("--steer-boosts: '{}': expected {}=rare or {}=missing", item,
                        to_string(*knob), to_string(*knob));
  }
  return out;
}

} // namespace mc::fuzz
