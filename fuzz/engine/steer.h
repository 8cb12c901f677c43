// Steering the engine-level generator toward coverage features a campaign has not reached yet
// (`fuzz --level engine --steer`).
//
// A knob is one choice of the generator that makes some features likelier (all mode, async
// scheduling, drafts, a tight pool, shared prompt prefixes, ...). The knobs column of
// model/coverage_features.def gives every engine-level coverage feature its knobs: a feature
// without a knob is one no campaign can be steered to, and does not compile.
//
// The campaign is cut into epochs of `epoch` cases. The boosts of epoch k come only from the
// cases of epochs < k (how many cases reached each feature), so they are the same for any
// --jobs: no case of epoch k starts before every verdict of epoch k-1 is in. The rule
// (steer_boosts): a feature that no case reached so far boosts its knobs to `missing`; one that
// fewer than 1 in kSteerRareCases (5%) of the cases reached, to `rare`; a knob takes the
// highest boost of its features. Epoch 0 has no counts and is drawn unboosted.
//
// A boosted knob forces its choice on a share of the cases that did not draw it:
// kSteerShareMissing (1/2) or kSteerShareRare (1/4), decided on a stream of its own
// (engine_case.cpp), so that unboosted choices stay those of the unsteered campaign.
#pragma once

#include "model/coverage.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace mc::fuzz {

enum class SteerKnob : std::uint8_t {
  all_mode,        // mamba_cache_mode all
  async,           // async scheduling, one step in flight
  drafts,          // speculative decoding on (1..3 drafts where a case drew none)
  no_drafts,       // speculative decoding off
  full_drafts,     // every draft accepted (full_drafts_per_million 1e6)
  rejected_drafts, // drafts often rejected (full_drafts_per_million 5e5 or 0)
  tight_pool,      // a pool of one request's worth plus a little, 2..4 running: preemption
  shared_prefixes, // prompts sharing prefixes often (prefix-cache hits)
  long_prompts,    // prompts of 3..4 blocks and a budget above two blocks
  big_blocks,      // block sizes 4..32
  ds_layout,       // DS conv layout
  v1_runner,       // the V1 runner
  v2_runner,       // the V2 runner
  batch_copy,      // V1 flat copy plan
  precopy_v1,      // V1 fused precopy as vLLM launches it today
  slot_tables,     // V2 tables found by slot
  deferred,        // V2 deferred postprocess (with slot tables)
  mixed_preset,    // tiny-mixed: several state kinds, states sharing pages
  reset,           // reset_prefix_cache on some steps
  abort,           // requests aborted
  wide_batches,    // 8..16 running requests with short prompts: decode-only steps of many rows
  follow_ups,      // a third of the requests continue an earlier one (a chat's next turn)
  padded_tails,    // a prompt's last token alone goes with placeholder drafts (pad_spec_decode)
  partial_hashes,  // a hash unit below the block size: partial-hash hits and their copies
};
inline constexpr std::size_t kSteerKnobCount = 24;

std::string_view to_string(SteerKnob knob);
std::optional<SteerKnob> find_steer_knob(std::string_view name);

enum class SteerBoost : std::uint8_t { none, rare, missing };

inline constexpr std::int64_t kSteerEpochDefault = 256;
inline constexpr std::int64_t kSteerRareCases = 20; // rare: reached by fewer than 1 in 20 cases
inline constexpr std::int32_t kSteerShareRare = 250'000;    // per million
inline constexpr std::int32_t kSteerShareMissing = 500'000; // per million

// The boosts one case is drawn with; all `none`: the unsteered generator, draw for draw.
struct SteerBoosts {
  std::array<SteerBoost, kSteerKnobCount> knobs{};

  SteerBoost at(SteerKnob k) const { return knobs[static_cast<std::size_t>(k)]; }
  bool any() const;
  bool operator==(const SteerBoosts&) const = default;
};

// The knobs of a coverage feature: at least one for an engine-level feature, none for another.
using SteerKnobs = std::array<std::optional<SteerKnob>, 3>;
const SteerKnobs& steer_knobs(model::CoverageFeatureId feature);

// For each engine feature, the cases that reached it (a count above 0 in the case's coverage).
struct SteerTally {
  std::int64_t cases = 0;
  std::map<std::string, std::int64_t, std::less<>> cases_reaching;
  void add(const model::Coverage& case_coverage);
};

// The rule above.
SteerBoosts steer_boosts(const SteerTally& tally);

// "knob=rare,knob=missing" (boosted knobs only, in knob order; empty when none): what the
// reproduce line of a steered case passes to --steer-boosts, and what the report records.
std::string to_string(const SteerBoosts& boosts);
// Throws InputError (one line) on an unknown knob or boost.
SteerBoosts parse_steer_boosts(std::string_view text);

} // namespace mc::fuzz
