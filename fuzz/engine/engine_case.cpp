// Generating and running one engine-level fuzz case (engine_case.h).
#include "fuzz/engine/engine_case.h"

#include "fuzz/gen_launch.h"
#include "fuzz/isolate.h"
#include "gpu/cuda_backend.h"
#include "harness/lockstep.h"
#include "harness/managed_steps.h"
#include "harness/simulate.h"
#include "model/errors.h"
#include "model/presets.h"
#include "model/prng.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <span>
#include <utility>

namespace mc::fuzz {
namespace {

using Rng = model::SplitMix64;

constexpr std::array kTinyPresets = {"tiny-mamba2",     "tiny-mamba1", "tiny-gdn",  "tiny-kda",
                                     "tiny-short-conv", "tiny-linear", "tiny-mixed"};
// Bigger families, their layers cut until the arenas fit kEngineCaseArenaBytesMax.
constexpr std::array kBigPresets = {"lfm2-1.2b", "hybrid-gdn-conv", "nemotron-h-8b", "mamba2-2.7b"};
// The production presets, for the cases drawn at production sizes (draw_production).
constexpr std::array kProductionPresets = {"mamba2-2.7b",     "nemotron-h-8b",   "qwen3-next-80b",
                                           "kimi-linear-48b", "falcon-mamba-7b", "lfm2-1.2b",
                                           "minimax-text-01", "hybrid-gdn-conv"};
// Mamba block sizes production models run with (vLLM rounds B up to a multiple of the
// attention block size; hundreds to thousands of tokens).
constexpr std::array kProductionBlockSizes = {256, 560, 1024, 2048};
constexpr std::int32_t kProductionPromptMax = 16384;
// From this size up, one case in six is drawn at production sizes (about one in ten of a
// campaign with the default --max-size 100).
constexpr int kProductionSizeMin = 40;
constexpr std::int32_t kProductionPerMillion = 166'667;
constexpr std::uint64_t kProductionStream = 0x70726f6475637469; // "producti"
constexpr std::uint64_t kConventionStream = 0x636f6e76656e7469; // "conventi"
constexpr std::uint64_t kEagleStream = 0x6561676c652d6d74;      // "eagle-mt"
constexpr std::uint64_t kSteerStream = 0x7374656572696e67;      // "steering"
constexpr std::uint64_t kTurnStream = 0x666f6c6c6f772d75;       // "follow-u"
constexpr std::uint64_t kTailStream = 0x7061642d7461696c;       // "pad-tail"
constexpr std::uint64_t kRevisitStream = 0x612d622d612d6869;    // "a-b-a-hi"
constexpr std::uint64_t kHashUnitStream = 0x686173682d756e69;   // "hash-uni"

// The generator of a case's choices from `stream` (0: its main one), for its seed and size.
Rng stream_rng(std::uint64_t case_seed, int size, std::uint64_t stream = 0) {
  return Rng::from_seed(model::mix64(case_seed ^ stream) ^ static_cast<std::uint64_t>(size));
}

template <typename T, std::size_t N> T pick(Rng& rng, const std::array<T, N>& items) {
  return items[static_cast<std::size_t>(rng.uniform(0, static_cast<std::int64_t>(N) - 1))];
}

// The knobs a steered campaign boosts for one case (fuzz/engine/steer.h): whether each forces
// its choice, and what it then draws, come from a stream of their own, and only boosted knobs
// draw from it, so an unboosted case is the unsteered campaign's case draw for draw.
class Steering {
public:
  Steering(const SteerBoosts& boosts, std::uint64_t case_seed, int size)
      : boosts_(boosts), rng_(stream_rng(case_seed, size, kSteerStream)) {}

  bool forces(SteerKnob knob) {
    const SteerBoost boost = boosts_.at(knob);
    if (boost == SteerBoost::none) return false; // no draw: the unsteered case's choices
    return rng_.chance(boost == SteerBoost::rare ? kSteerShareRare : kSteerShareMissing);
  }
  Rng& rng() { return rng_; }
  // Decided with the workload bounds (longer outputs), applied to the pool and requests.
  bool tight_pool = false;
  bool wide_batches = false;

  // Drafts on (1..3 where none were drawn) or off.
  std::int32_t drafts(std::int32_t num_spec) {
    if (forces(SteerKnob::drafts)) return num_spec > 0 ? num_spec : rng_.uniform32(1, 3);
    if (forces(SteerKnob::no_drafts)) return 0;
    return num_spec;
  }

private:
  SteerBoosts boosts_;
  Rng rng_;
};

std::int64_t arena_bytes(const model::Layout& layout) {
  std::int64_t total = 0;
  for (const model::ArenaSpec& a : layout.arenas)
    total += a.size_bytes();
  return total;
}

// Blocks one request needs, as validate_options counts them, plus the null block.
std::int64_t pool_blocks_min(const EngineCase& c) {
  const oracle::engine::WorkloadOptions& w = c.engine.workload;
  const std::int32_t unit = c.engine.scheduler.hash_block_size;
  const bool partial = unit != 0 && unit != c.config.mamba_block_size;
  const std::int64_t per_request =
      c.config.mode == model::CacheMode::align
          ? 3 + c.config.num_spec_blocks + (partial ? 1 : 0)
          : model::cdiv(w.prompt_len_max + w.output_len_max + 1, c.config.mamba_block_size) + 1 +
                c.config.num_spec_blocks;
  return per_request + 1;
}

void draw_config(EngineCase& c, Rng& rng, const EngineCaseFixed& fixed, Steering& steer) {
  const int size = c.size;
  const bool big = size >= 60 && rng.chance(250'000);
  c.preset = big ? pick(rng, kBigPresets) : pick(rng, kTinyPresets);
  if (steer.forces(SteerKnob::mixed_preset)) c.preset = "tiny-mixed";
  const model::Preset& preset = model::find_preset(c.preset);
  c.config = preset.config;
  c.spec = preset.spec;
  constexpr std::array kBlockSizes = {1, 2, 3, 4, 4, 4, 5, 8};
  constexpr std::array kBigBlockSizes = {4, 8, 16, 16, 32};
  c.config.mamba_block_size =
      size > 40 && rng.chance(300'000) ? pick(rng, kBigBlockSizes) : pick(rng, kBlockSizes);
  if (steer.forces(SteerKnob::big_blocks))
    c.config.mamba_block_size = pick(steer.rng(), kBigBlockSizes);
  if (fixed.block_size) c.config.mamba_block_size = *fixed.block_size;
  if (fixed.token_budget)
    c.config.mamba_block_size = std::min(c.config.mamba_block_size, *fixed.token_budget);
  constexpr std::array kAttnBlockSizes = {1, 2, 4, 8, 16};
  c.config.attn_block_size = pick(rng, kAttnBlockSizes);
  c.config.mode = rng.chance(150'000) ? model::CacheMode::all : model::CacheMode::align;
  if (steer.forces(SteerKnob::all_mode)) c.config.mode = model::CacheMode::all;
  // Both modes draw their drafts alike (all mode keeps one speculative column per draft).
  const std::int64_t roll = rng.uniform(0, 99);
  std::int32_t num_spec = roll < 25 ? 0 : roll < 80 ? rng.uniform32(1, 3) : rng.uniform32(4, 8);
  num_spec = steer.drafts(num_spec);
  // A decode step crossing more than one block boundary (B < 1 + drafts) leaves boundary
  // states no write produced, which the oracle's scheduler still caches (reported as a
  // finding of its own): the generator keeps B >= 1 + drafts.
  num_spec = std::min(num_spec, c.config.mamba_block_size - 1);
  if (fixed.token_budget) num_spec = std::min(num_spec, *fixed.token_budget - 1);
  c.config.num_spec_tokens = num_spec;
  c.config.num_spec_blocks = num_spec;
  c.config.conv_layout = rng.chance(500'000) ? model::ConvLayout::DS : model::ConvLayout::SD;
  if (steer.forces(SteerKnob::ds_layout)) c.config.conv_layout = model::ConvLayout::DS;
  c.engine.runner.flavour =
      rng.chance(500'000) ? model::RunnerFlavour::v2 : model::RunnerFlavour::v1;
  if (steer.forces(SteerKnob::v2_runner))
    c.engine.runner.flavour = model::RunnerFlavour::v2;
  else if (steer.forces(SteerKnob::v1_runner))
    c.engine.runner.flavour = model::RunnerFlavour::v1;
  c.engine.runner.v1_copy_path = rng.chance(500'000) ? oracle::engine::V1CopyPath::batch_copy
                                                     : oracle::engine::V1CopyPath::precopy;
  if (steer.forces(SteerKnob::batch_copy))
    c.engine.runner.v1_copy_path = oracle::engine::V1CopyPath::batch_copy;
  // batch_copy cannot express a DS conv copy with a token bias (REFERENCE.md 2): the oracle
  // reports it (unsupported_copy), so drafts with DS go through the fused precopy.
  if (c.config.conv_layout == model::ConvLayout::DS && num_spec > 0)
    c.engine.runner.v1_copy_path = oracle::engine::V1CopyPath::precopy;
  c.engine.runner.row_stride_extra = rng.uniform32(0, 3);
}

void draw_options(EngineCase& c, Rng& rng, const EngineCaseFixed& fixed, Steering& steer) {
  const int size = c.size;
  const std::int32_t B = c.config.mamba_block_size;
  oracle::engine::WorkloadOptions& w = c.engine.workload;
  w.vocab_size = rng.chance(500'000) ? 64 : 512;
  w.prompt_len_min = 1;
  w.prompt_len_max = rng.uniform32(1, 2 * B + 2 + size / 2);
  w.output_len_min = 1;
  w.output_len_max = rng.uniform32(1, B + 4 + size / 3);
  w.num_shared_prefixes = rng.uniform32(0, 3);
  w.shared_prefix_per_million = rng.uniform32(0, 1'000'000);
  if (steer.forces(SteerKnob::shared_prefixes)) {
    w.num_shared_prefixes = steer.rng().uniform32(1, 3);
    w.shared_prefix_per_million = steer.rng().uniform32(500'000, 1'000'000);
  }
  const bool long_prompts = steer.forces(SteerKnob::long_prompts);
  if (long_prompts)
    w.prompt_len_max = std::max(w.prompt_len_max, steer.rng().uniform32(3 * B, 4 * B + size / 2));
  w.arrivals_per_step_max = rng.uniform32(1, 3);
  // Outputs of a few blocks: the requests a tight pool preempts have decoded for a while.
  steer.tight_pool = steer.forces(SteerKnob::tight_pool);
  if (steer.tight_pool)
    w.output_len_max = std::max(w.output_len_max, steer.rng().uniform32(2 * B, 4 * B + 8));
  oracle::engine::SchedulerOptions& s = c.engine.scheduler;
  s.token_budget =
      std::max(B, 1 + c.config.num_spec_tokens) + rng.uniform32(0, 2 * B + 2 + size / 2);
  if (long_prompts)
    s.token_budget = std::min(oracle::engine::kTokenBudgetMax,
                              std::max(s.token_budget, 2 * B + 1 + steer.rng().uniform32(0, B)));
  if (fixed.token_budget) s.token_budget = *fixed.token_budget;
  s.max_running = rng.uniform32(1, 4 + size / 8);
  steer.wide_batches = steer.forces(SteerKnob::wide_batches);
  if (steer.wide_batches) {
    s.max_running = std::max(s.max_running, steer.rng().uniform32(8, 16));
    w.prompt_len_max = std::min(w.prompt_len_max, B);
    w.arrivals_per_step_max = 3;
  }
  s.reset_prefix_cache_per_million = rng.chance(400'000) ? rng.uniform32(5'000, 150'000) : 0;
  if (steer.forces(SteerKnob::reset) && s.reset_prefix_cache_per_million == 0)
    s.reset_prefix_cache_per_million = steer.rng().uniform32(5'000, 150'000);
  s.abort_per_million = rng.chance(300'000) ? rng.uniform32(5'000, 100'000) : 0;
  if (steer.forces(SteerKnob::abort) && s.abort_per_million == 0)
    s.abort_per_million = steer.rng().uniform32(5'000, 100'000);
  constexpr std::array kFullDrafts = {1'000'000, 800'000, 500'000, 0};
  s.full_drafts_per_million = pick(rng, kFullDrafts);
  constexpr std::array kRejectedDrafts = {500'000, 0};
  if (steer.forces(SteerKnob::full_drafts))
    s.full_drafts_per_million = 1'000'000;
  else if (steer.forces(SteerKnob::rejected_drafts))
    s.full_drafts_per_million = pick(steer.rng(), kRejectedDrafts);
  // Async scheduling (one step in flight) in a quarter of the cases, as vLLM runs by default.
  s.async_scheduling = rng.chance(250'000);
  if (steer.forces(SteerKnob::async)) s.async_scheduling = true;
  if (fixed.async_scheduling) s.async_scheduling = true;
  s.drafter_prunes_last_block = false; // drawn once the drafts are known (generate_engine_case)
  c.engine.cache_sweep_every = 8;
}

// A production family at a production block size, with prompts up to 16k tokens. Arenas stay
// within kProductionCaseArenaBytesMax (make_valid cuts layers): a state's size does not grow
// with B, so such a case costs its tokens, not its block size. Keeps the drawn mode, conv layout,
// runner and scheduler rates; redraws what production changes.
void draw_production(EngineCase& c, Rng& rng, const EngineCaseFixed& fixed, Steering& steer) {
  c.preset = pick(rng, kProductionPresets);
  const model::Preset& preset = model::find_preset(c.preset);
  const model::CacheMode mode = c.config.mode;
  const model::ConvLayout conv_layout = c.config.conv_layout;
  c.config = preset.config;
  c.config.mode = mode;
  c.config.conv_layout = conv_layout;
  c.spec = preset.spec;
  c.preset_layout = true;
  std::int32_t B =
      rng.chance(500'000) ? preset.config.mamba_block_size : pick(rng, kProductionBlockSizes);
  if (fixed.block_size) B = *fixed.block_size;
  if (fixed.token_budget) B = std::min(B, *fixed.token_budget);
  c.config.mamba_block_size = B;
  const std::int64_t roll = rng.uniform(0, 99);
  std::int32_t num_spec = roll < 25 ? 0 : roll < 75 ? rng.uniform32(1, 3) : rng.uniform32(4, 7);
  num_spec = steer.drafts(num_spec);
  num_spec = std::min(num_spec, B - 1);
  if (fixed.token_budget) num_spec = std::min(num_spec, *fixed.token_budget - 1);
  c.config.num_spec_tokens = num_spec;
  c.config.num_spec_blocks = num_spec;
  if (conv_layout == model::ConvLayout::DS && num_spec > 0)
    c.engine.runner.v1_copy_path = oracle::engine::V1CopyPath::precopy;
  oracle::engine::WorkloadOptions& w = c.engine.workload;
  w.prompt_len_max = rng.uniform32(B, kProductionPromptMax);
  w.output_len_max = rng.uniform32(1, B + 64);
  oracle::engine::SchedulerOptions& s = c.engine.scheduler;
  s.token_budget = std::max(B, 1 + num_spec) + rng.uniform32(0, B);
  if (fixed.token_budget) s.token_budget = *fixed.token_budget;
}

// The conventions of today's vLLM beside the seed's (model/runner_options.h): V1's fused
// pre-copy as vLLM launches it (precopy_v1) in place of the identity-mapped precopy, and V2
// tables found by slot (#55506), half of those with the postprocess deferred. A deferred
// postprocess over batch-row tables is never drawn: it copies through another request's row
// (#55951), a finding on nearly every run (tests/oracle/engine run it on purpose).
void draw_conventions(EngineCase& c, Rng& rng, Steering& steer) {
  model::RunnerOptions& r = c.engine.runner;
  if (r.v1_copy_path == oracle::engine::V1CopyPath::precopy && rng.chance(600'000))
    r.v1_copy_path = oracle::engine::V1CopyPath::precopy_v1;
  if (rng.chance(500'000)) {
    r.v2_table_rows = model::V2TableRows::slot;
    r.deferred_postprocess = rng.chance(500'000);
  }
  // The fused pre-copy expresses every copy (a DS conv state with a bias included), so it may
  // take the place of either V1 path.
  if (steer.forces(SteerKnob::precopy_v1)) r.v1_copy_path = oracle::engine::V1CopyPath::precopy_v1;
  if (steer.forces(SteerKnob::slot_tables)) r.v2_table_rows = model::V2TableRows::slot;
  if (steer.forces(SteerKnob::deferred)) {
    r.v2_table_rows = model::V2TableRows::slot;
    r.deferred_postprocess = true;
  }
}

// The runner options a case with these launch kinds can take instead of `r`, nearest first:
// the same flavour with the other table convention or another copy path, then the other
// flavour. batch_copy cannot carry a DS conv copy with drafts (draw_config).
std::vector<model::RunnerOptions> runner_alternatives(const EngineCase& c) {
  const model::RunnerOptions& r = c.engine.runner;
  const bool ds_drafts =
      c.config.conv_layout == model::ConvLayout::DS && c.config.num_spec_tokens > 0;
  std::vector<model::RunnerOptions> out;
  const model::RunnerFlavour other =
      r.flavour == model::RunnerFlavour::v1 ? model::RunnerFlavour::v2 : model::RunnerFlavour::v1;
  for (const model::RunnerFlavour flavour : {r.flavour, other}) {
    model::RunnerOptions a = r;
    a.flavour = flavour;
    if (flavour == model::RunnerFlavour::v2) {
      for (const model::V2TableRows rows : {r.v2_table_rows, model::V2TableRows::batch_row,
                                            model::V2TableRows::slot}) {
        a.v2_table_rows = rows;
        a.deferred_postprocess = rows == model::V2TableRows::slot && r.deferred_postprocess;
        out.push_back(a);
      }
      continue;
    }
    for (const model::V1CopyPath path :
         {r.v1_copy_path, model::V1CopyPath::precopy_v1, model::V1CopyPath::precopy,
          model::V1CopyPath::batch_copy}) {
      if (path == model::V1CopyPath::batch_copy && ds_drafts) continue;
      a.v1_copy_path = path;
      out.push_back(a);
    }
  }
  return out;
}

void fit_to_kinds(EngineCase& c, const std::vector<model::LaunchKind>& kinds) {
  if (kinds.empty()) return;
  for (const model::RunnerOptions& r : runner_alternatives(c)) {
    const std::vector<model::LaunchKind> needed = model::runner_launch_kinds(r, c.config.mode);
    if (std::ranges::all_of(needed, [&](model::LaunchKind k) {
          return std::ranges::find(kinds, k) != kinds.end();
        })) {
      c.engine.runner = r;
      return;
    }
  }
  // None fits: the run reports the kind its kernels lack.
}

// Makes the case valid: drafts off where a conv window cannot hold them, layers cut (then a
// tiny preset) until the arenas fit, the pool at least one request's worth.
void make_valid(EngineCase& c, Rng& rng, const EngineCaseFixed& fixed,
                std::int64_t arena_bytes_max) {
  // Cutting layers (up to log2 of 64 halvings, then a tiny preset) does not count as a failed
  // attempt: a big family that also needed its drafts turned off once ran out of attempts.
  constexpr int kErrorsMax = 8;
  constexpr int kRoundsMax = 64;
  std::string last_error;
  int errors = 0;
  for (int round = 0; round < kRoundsMax && errors < kErrorsMax; ++round) {
    c.spec.num_blocks = std::max(c.spec.num_blocks, pool_blocks_min(c));
    try {
      model::CacheConfig config = c.config;
      config.runner = c.engine.runner.flavour;
      const model::Layout layout = model::build_layout(config, c.spec);
      if (arena_bytes(layout) > arena_bytes_max) {
        bool cut = false;
        for (model::GroupSpec& g : c.spec.groups)
          if (g.num_layers > 1) {
            g.num_layers = std::max(1, g.num_layers / 2);
            cut = true;
          }
        if (!cut) {
          c.preset = pick(rng, kTinyPresets);
          const model::Preset& p = model::find_preset(c.preset);
          const std::int64_t blocks = c.spec.num_blocks;
          c.spec = p.spec;
          c.spec.num_blocks = blocks;
        }
        c.preset_layout = cut ? false : true;
        continue;
      }
      oracle::engine::validate_options(c.engine, layout);
      return;
    } catch (const model::InputError& e) {
      ++errors;
      last_error = e.what();
      if (c.config.num_spec_tokens > 0) {
        c.config.num_spec_tokens = 0;
        c.config.num_spec_blocks = 0;
        c.engine.scheduler.drafter_prunes_last_block = false;
      } else if (!fixed.token_budget) {
        c.engine.scheduler.token_budget =
            std::max(c.engine.scheduler.token_budget, c.config.mamba_block_size + 1);
      }
    }
  }
  std::fprintf(stderr, "mambacheck: generate_engine_case: no valid case: %s\n", last_error.c_str());
  MC_ASSERT(false && "generate_engine_case: no valid case");
}

// A chat's next turn: a third of the later requests become the follow-up of an earlier one,
// their prompt that request's whole sequence (prompt and output) and then their own, so their
// hits reach states registered while it decoded. Their own output length stays as drawn. One
// turn deep (a follow-up is not followed), and no prompt past the production maximum. Returns
// the pairs (earlier turn, follow-up).
std::vector<std::pair<std::size_t, std::size_t>>
draw_follow_ups(std::vector<oracle::engine::RequestSpec>& requests, Rng& rng) {
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  std::vector<bool> follow_up(requests.size(), false);
  for (std::size_t k = 1; k < requests.size(); ++k) {
    if (!rng.chance(333'333)) continue;
    const auto j = static_cast<std::size_t>(rng.uniform(0, static_cast<std::int64_t>(k) - 1));
    const oracle::engine::RequestSpec& last = requests[j];
    oracle::engine::RequestSpec& next = requests[k];
    if (follow_up[j] || last.max_len + next.num_prompt_tokens > kProductionPromptMax) continue;
    follow_up[k] = true;
    const std::int32_t output = next.max_len - next.num_prompt_tokens;
    std::vector<std::int32_t> tokens(last.tokens.begin(), last.tokens.begin() + last.max_len);
    tokens.insert(tokens.end(), next.tokens.begin(), next.tokens.end());
    next.tokens = std::move(tokens);
    next.num_prompt_tokens += last.max_len;
    next.max_len = next.num_prompt_tokens + output;
    pairs.emplace_back(j, k);
  }
  return pairs;
}

// vLLM #50630: corruption that needs a prefix cached by A, hit by another request B, then hit
// again by A's next turn. For half the follow-up pairs, a request that arrives between the two
// turns (not a turn of a chat itself) starts with the first turn's prompt but its last token,
// as far as its own prompt reaches, so its hit lands on the blocks the first turn cached before
// the follow-up's. One token short: B's prompt never extends A's whole prompt, as a next turn of
// A's chat would.
void draw_revisits(std::vector<oracle::engine::RequestSpec>& requests,
                   std::span<const std::pair<std::size_t, std::size_t>> pairs, Rng& rng) {
  std::vector<bool> turn(requests.size(), false);
  for (const auto& [first, next] : pairs)
    turn[first] = turn[next] = true;
  for (const auto& [first, next] : pairs) {
    if (!rng.chance(500'000) || next - first < 2) continue;
    const auto between = static_cast<std::size_t>(
        rng.uniform(static_cast<std::int64_t>(first) + 1, static_cast<std::int64_t>(next) - 1));
    if (turn[between]) continue;
    const oracle::engine::RequestSpec& a = requests[first];
    oracle::engine::RequestSpec& b = requests[between];
    const std::int32_t shared = std::min(a.num_prompt_tokens - 1, b.num_prompt_tokens);
    std::copy(a.tokens.begin(), a.tokens.begin() + shared, b.tokens.begin());
  }
}

} // namespace

void fit_workload_bounds(EngineCase& c) {
  oracle::engine::WorkloadOptions& w = c.engine.workload;
  w.prompt_len_min = 1;
  w.output_len_min = 1;
  w.prompt_len_max = 1;
  w.output_len_max = 1;
  for (const oracle::engine::RequestSpec& r : c.requests) {
    w.prompt_len_max = std::max(w.prompt_len_max, r.num_prompt_tokens);
    w.output_len_max = std::max(w.output_len_max, r.max_len - r.num_prompt_tokens);
  }
}

nlohmann::json to_json(const EngineCaseFixed& f) {
  nlohmann::json j = nlohmann::json::object();
  if (f.block_size) j["block_size"] = *f.block_size;
  if (f.token_budget) j["token_budget"] = *f.token_budget;
  if (f.async_scheduling) j["async"] = true;
  if (f.steer.any()) j["steer_boosts"] = to_string(f.steer);
  if (!f.kinds.empty()) j["kinds"] = kind_names(f.kinds);
  return j;
}

EngineCaseFixed fixed_from_json(const nlohmann::json& j) {
  EngineCaseFixed f{.async_scheduling = j.value("async", false)};
  if (j.contains("block_size")) f.block_size = j.at("block_size").get<std::int32_t>();
  if (j.contains("token_budget")) f.token_budget = j.at("token_budget").get<std::int32_t>();
  if (j.contains("steer_boosts"))
    f.steer = parse_steer_boosts(j.at("steer_boosts").get<std::string>());
  for (const nlohmann::json& kind : j.value("kinds", nlohmann::json::array()))
    f.kinds.push_back(model::parse_launch_kind(kind.get<std::string>()));
  return f;
}

void validate_fixed(const EngineCaseFixed& fixed) {
  if (fixed.block_size && (*fixed.block_size < 1 || *fixed.block_size > model::kBlockSizeMax))
    model::fail_input("--block-size must be in 1..{}, got {}", model::kBlockSizeMax,
                      *fixed.block_size);
  if (fixed.token_budget &&
      (*fixed.token_budget < 1 || *fixed.token_budget > oracle::engine::kTokenBudgetMax))
    model::fail_input("--token-budget must be in 1..{}, got {}", oracle::engine::kTokenBudgetMax,
                      *fixed.token_budget);
  if (fixed.block_size && fixed.token_budget && *fixed.token_budget < *fixed.block_size)
    model::fail_input("--token-budget {} must be at least --block-size {} (a block-aligned "
                      "split never progresses with less)",
                      *fixed.token_budget, *fixed.block_size);
}

// vLLM's partial-hash hits: a hash unit below the block size (a proper divisor of it, align
// mode, no EAGLE drafter: the model has no back-off over partial hits) in a third of the cases
// from the production sizes on, and where steering forces it. From a stream of its own, as
// EAGLE's, so that the other choices of a case stay what they were.
void draw_hash_unit(EngineCase& c, std::uint64_t case_seed, int size, Steering& steer) {
  const std::int32_t B = c.config.mamba_block_size;
  if (c.config.mode != model::CacheMode::align || B < 2 ||
      c.engine.scheduler.drafter_prunes_last_block)
    return;
  Rng units = stream_rng(case_seed, size, kHashUnitStream);
  if (!((size >= kProductionSizeMin && units.chance(333'333)) ||
        steer.forces(SteerKnob::partial_hashes)))
    return;
  std::vector<std::int32_t> divisors;
  for (std::int32_t d = 1; d <= B / 2; ++d)
    if (B % d == 0) divisors.push_back(d);
  c.engine.scheduler.hash_block_size = divisors[static_cast<std::size_t>(
      units.uniform(0, static_cast<std::int64_t>(divisors.size()) - 1))];
}

EngineCase generate_engine_case(std::uint64_t case_seed, int size, const EngineCaseFixed& fixed) {
  MC_ASSERT(size >= 0 && size <= kEngineSizeMax);
  Rng rng = stream_rng(case_seed, size);
  EngineCase c{.case_seed = case_seed, .size = size, .steer = fixed.steer};
  Steering steer(fixed.steer, case_seed, size);
  draw_config(c, rng, fixed, steer);
  draw_options(c, rng, fixed, steer);
  // From a stream of its own, so that the other cases of a seed stay what they were.
  Rng production = stream_rng(case_seed, size, kProductionStream);
  const bool at_production_sizes =
      size >= kProductionSizeMin && production.chance(kProductionPerMillion);
  if (at_production_sizes) draw_production(c, production, fixed, steer);
  // Also from a stream of its own: these choose among equivalent paths, never the workload.
  Rng conventions = stream_rng(case_seed, size, kConventionStream);
  draw_conventions(c, conventions, steer);
  // EAGLE/MTP drafting in a quarter of the cases that draft, from the sizes production draws
  // start at: the split's back-off and, through a block manager, the hit's dropped block and
  // the lookahead. From a stream of its own too, and above those sizes only, so that the small
  // campaigns drawn before it (and the reports they wrote) stay what they were.
  Rng eagle = stream_rng(case_seed, size, kEagleStream);
  c.engine.scheduler.drafter_prunes_last_block =
      size >= kProductionSizeMin && c.config.num_spec_tokens > 0 && eagle.chance(250'000);
  // Padded prompt tails (vLLM's pad_spec_decode) in half the cases that draft from the same
  // sizes on, and where steering forces them; a stream of their own, as EAGLE's.
  Rng tails = stream_rng(case_seed, size, kTailStream);
  c.engine.scheduler.pad_prompt_tails =
      c.config.num_spec_tokens > 0 && ((size >= kProductionSizeMin && tails.chance(500'000)) ||
                                       steer.forces(SteerKnob::padded_tails));
  draw_hash_unit(c, case_seed, size, steer);
  fit_to_kinds(c, fixed.kinds);
  // A tight pool preempts only with several requests running.
  const bool tight_pool = steer.tight_pool;
  std::int32_t num_requests = rng.uniform32(1, 3 + size * size / 80);
  if (tight_pool) {
    num_requests = std::max(num_requests, steer.rng().uniform32(3, 6));
    c.engine.scheduler.max_running =
        std::max(c.engine.scheduler.max_running, steer.rng().uniform32(2, 4));
  }
  // Wide batches: as many requests as may run, and a pool that holds them all.
  if (steer.wide_batches)
    num_requests = std::max(num_requests, c.engine.scheduler.max_running);
  c.requests = oracle::engine::generate_workload(c.engine.workload, num_requests,
                                                 model::kSpecTokensMax + 2, rng);
  // Follow-up turns in a quarter of the cases from the production sizes on, and where steering
  // forces them; their own stream and sizes, as EAGLE's above.
  Rng turns = stream_rng(case_seed, size, kTurnStream);
  if ((size >= kProductionSizeMin && turns.chance(250'000)) ||
      steer.forces(SteerKnob::follow_ups)) {
    const auto pairs = draw_follow_ups(c.requests, turns);
    Rng revisits = stream_rng(case_seed, size, kRevisitStream);
    draw_revisits(c.requests, pairs, revisits);
  }
  fit_workload_bounds(c);
  const std::int64_t per_request = pool_blocks_min(c);
  // A production family's states are large: its pool stays within a few requests' worth.
  c.spec.num_blocks = at_production_sizes
                          ? per_request + rng.uniform(0, per_request)
                          : per_request + rng.uniform(0, per_request * rng.uniform(0, 3)) +
                                (size > 50 ? rng.uniform(0, 40) : 0);
  if (tight_pool) c.spec.num_blocks = per_request + steer.rng().uniform(0, per_request / 2);
  else if (steer.wide_batches)
    c.spec.num_blocks =
        std::max(c.spec.num_blocks, per_request * c.engine.scheduler.max_running + 1);
  c.num_steps = 12 + rng.uniform(0, 6 * std::int64_t{size});
  c.scheduler_seed = rng.next();
  make_valid(c, rng, fixed,
             at_production_sizes ? kProductionCaseArenaBytesMax : kEngineCaseArenaBytesMax);
  return c;
}

std::string describe(const EngineCase& c) {
  const model::CacheConfig& k = c.config;
  const oracle::engine::SchedulerOptions& s = c.engine.scheduler;
  std::string layers;
  for (const model::GroupSpec& g : c.spec.groups)
    layers += fmt::format("{}{}", layers.empty() ? "" : "+", g.num_layers);
  return fmt::format(
      "{} (layers {}), {} {} {}{}, B {} attn {}, drafts {}, pool {}, budget {}, running {}, "
      "resets {}/M, aborts {}/M, full drafts {}/M{}{}{}{}, {} requests, {} steps",
      c.preset, layers, model::to_string(k.mode), model::to_string(c.engine.runner.flavour),
      model::to_string(k.conv_layout),
      c.engine.runner.flavour == model::RunnerFlavour::v1
          ? fmt::format(" {}", model::to_string(c.engine.runner.v1_copy_path))
          : fmt::format(" tables by {}{}", model::to_string(c.engine.runner.v2_table_rows),
                        c.engine.runner.deferred_postprocess ? ", deferred postprocess" : ""),
      k.mamba_block_size, k.attn_block_size, k.num_spec_tokens, c.spec.num_blocks, s.token_budget,
      s.max_running, s.reset_prefix_cache_per_million, s.abort_per_million,
      s.full_drafts_per_million, s.async_scheduling ? ", async" : "",
      s.drafter_prunes_last_block ? ", drafter prunes" : "",
      s.pad_prompt_tails ? ", padded tails" : "",
      s.hash_block_size != 0 ? fmt::format(", hash unit {}", s.hash_block_size) : "",
      c.requests.size(), c.num_steps);
}

namespace {

nlohmann::ordered_json case_fields(const EngineCase& c) {
  const oracle::engine::SchedulerOptions& s = c.engine.scheduler;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const model::GroupSpec& g : c.spec.groups)
    layers.push_back(g.num_layers);
  nlohmann::ordered_json requests = nlohmann::ordered_json::array();
  for (const oracle::engine::RequestSpec& r : c.requests)
    requests.push_back({{"id", r.req_id},
                        {"arrival_step", r.arrival_step},
                        {"prompt_tokens", r.num_prompt_tokens},
                        {"max_len", r.max_len}});
  return {{"case_seed", c.case_seed},
          {"size", c.size},
          {"preset", c.preset},
          {"layers", layers},
          {"mode", model::to_string(c.config.mode)},
          {"runner", model::to_string(c.engine.runner.flavour)},
          {"v1_copy_path", model::to_string(c.engine.runner.v1_copy_path)},
          {"v2_table_rows", model::to_string(c.engine.runner.v2_table_rows)},
          {"deferred_postprocess", c.engine.runner.deferred_postprocess},
          {"conv_layout", model::to_string(c.config.conv_layout)},
          {"mamba_block_size", c.config.mamba_block_size},
          {"attn_block_size", c.config.attn_block_size},
          {"num_spec_tokens", c.config.num_spec_tokens},
          {"pool_blocks", c.spec.num_blocks},
          {"row_stride_extra", c.engine.runner.row_stride_extra},
          {"token_budget", s.token_budget},
          {"max_running", s.max_running},
          {"reset_prefix_cache_per_million", s.reset_prefix_cache_per_million},
          {"abort_per_million", s.abort_per_million},
          {"full_drafts_per_million", s.full_drafts_per_million},
          {"async_scheduling", s.async_scheduling},
          {"drafter_prunes_last_block", s.drafter_prunes_last_block},
          {"pad_prompt_tails", s.pad_prompt_tails},
          {"scheduler_seed", c.scheduler_seed},
          {"num_steps", c.num_steps},
          {"requests", requests}};
}

} // namespace

nlohmann::ordered_json to_json(const EngineCase& c) {
  nlohmann::ordered_json j = case_fields(c);
  // Only where the case draws one, so that a case without (every case drawn before it) reads the
  // same.
  const std::int32_t unit = c.engine.scheduler.hash_block_size;
  if (unit != 0) j["hash_block_size"] = unit;
  return j;
}

EngineOutcome isolated_engine_outcome(const IsolatedOutcome& r) {
  if (r.returned()) return outcome_from_json(nlohmann::ordered_json::parse(r.payload));
  // The steps it started came as its progress: the crash happened in the last of them.
  const std::int64_t steps = r.progress;
  const std::int64_t step = std::max<std::int64_t>(steps - 1, 0);
  EngineOutcome lost{.steps_run = steps};
  lost.failure =
      harness::Difference{.kind = r.end == IsolatedEnd::timed_out ? "timeout" : "crash",
                          .step = step,
                          .text = fmt::format("step {}: the backend crashed: {}", step, r.message)};
  return lost;
}

EngineOutcome run_engine_case_reporting_steps(const EngineCase& c, const EngineRunOptions& run) {
  EngineRunOptions here = run;
  here.isolate = false;
  std::int64_t started = 0;
  return run_engine_case(c, here, nullptr, [&started] { report_progress(++started); });
}

namespace {

EngineOutcome run_isolated_case(const EngineCase& c, const EngineRunOptions& run) {
  MC_ASSERT(run.executor == model::Backend::host);
  // Runs in the child as soon as it is forked: `c` is still there.
  return isolated_engine_outcome(
      run_isolated([&c, &run] { return to_json(run_engine_case_reporting_steps(c, run)).dump(); },
                   IsolateOptions{.timeout_seconds = run.timeout_seconds}));
}

} // namespace

bool runs_here_possible(const EngineRunOptions& run) {
  return run.executor != model::Backend::cuda || run.external != nullptr ||
         gpu::cuda_context_usable();
}

EngineOutcome run_engine_case(const EngineCase& c, const EngineRunOptions& run,
                              std::vector<model::Step>* steps_out,
                              const std::function<void()>& on_step_started) {
  if (run.isolate && run.external == nullptr && run.manager == nullptr && steps_out == nullptr)
    return run_isolated_case(c, run);
  EngineOutcome out;
  // A failure before the first step: step 0's.
  const auto failed_at_start = [&out](std::string kind, const std::string& what) {
    out.failure =
        harness::Difference{.kind = std::move(kind), .step = 0, .text = "step 0: " + what};
    return out;
  };
  std::optional<model::Layout> layout;
  std::unique_ptr<oracle::engine::Engine> engine;
  std::unique_ptr<harness::ManagedSteps> managed;
  std::unique_ptr<gpu::engine::EngineRunner> backend;
  try {
    const EngineCase sized = with_manager_pool(c, run.manager);
    model::CacheConfig config = sized.config;
    config.runner = c.engine.runner.flavour;
    layout = model::build_layout(config, sized.spec);
    oracle::engine::validate_options(c.engine, *layout);
    if (run.manager != nullptr)
      managed = std::make_unique<harness::ManagedSteps>(*layout, c.requests, c.scheduler_seed,
                                                        c.engine, *run.manager);
    else
      engine = std::make_unique<oracle::engine::Engine>(*layout, c.requests, c.scheduler_seed,
                                                        c.engine);
    harness::require_covered(run.external, c.engine.runner, c.config.mode);
    backend = std::make_unique<gpu::engine::EngineRunner>(
        *layout,
        harness::backend_runner_options(c.engine.runner, run.runner_mutant, run.kernel_mutant),
        run.executor, run.external);
  } catch (const model::InputError& e) {
    out.valid = false;
    out.invalid_reason = e.what();
    return out;
  } catch (const oracle::engine::KvManagerRefusal& e) {
    out.refused_by_manager = e.reason;
    return out;
  } catch (const oracle::engine::KvManagerFault& e) { // the manager failed its setup
    return failed_at_start("block_manager_fault", "block_manager_fault: " + e.message);
  } catch (const gpu::engine::KernelFailure& e) { // the worker died opening the run
    return failed_at_start(e.kind, fmt::format("the kernels under test failed: {}", e.what()));
  } catch (const model::EnvironmentError& e) {
    // The arenas could not be made because a fault of this run's kernels, or of another
    // process's on a GPU shared through MPS, left the context unusable: the device's failure.
    if (runs_here_possible(run)) throw;
    return failed_at_start("device-fault", fmt::format("the device faulted: {}", e.what()));
  }
  std::optional<harness::ScheduledSteps> scheduled;
  if (engine)
    scheduled.emplace(*engine, harness::scheduler_mutant_edit(run.scheduler_mutant, *engine));
  harness::OracleSide& steps =
      managed ? static_cast<harness::OracleSide&>(*managed) : *scheduled;
  harness::LockstepHooks hooks{.backend_errors_are_findings = true};
  if (steps_out || on_step_started)
    hooks.on_step = [steps_out, &on_step_started](const harness::OracleStep& o) {
      if (steps_out) steps_out->push_back(o.step);
      if (on_step_started) on_step_started();
    };
  harness::LockstepResult r = harness::run_lockstep(steps, *backend, c.num_steps, hooks);
  out.steps_run = r.steps_run;
  out.bytes_compared = r.bytes_compared;
  out.coverage = std::move(r.coverage);
  out.failure = std::move(r.failure);
  return out;
}

EngineCase with_manager_pool(const EngineCase& c, const oracle::engine::KvManager* manager) {
  if (manager == nullptr) return c;
  EngineCase grown = c;
  harness::fit_to_manager(grown.config, grown.spec, c.requests, c.engine, *manager);
  return grown;
}

std::vector<model::Step> oracle_steps(const EngineCase& c, std::int64_t steps_max,
                                      harness::SchedulerMutant mutant,
                                      oracle::engine::KvManager* manager,
                                      model::SchedulerContract* contract) {
  const EngineCase sized = with_manager_pool(c, manager);
  model::CacheConfig config = sized.config;
  config.runner = c.engine.runner.flavour;
  const model::Layout layout = model::build_layout(config, sized.spec);
  std::optional<oracle::engine::Engine> engine;
  std::optional<harness::ScheduledSteps> planned;
  std::optional<harness::ManagedSteps> managed;
  if (manager != nullptr) {
    managed.emplace(layout, c.requests, c.scheduler_seed, c.engine, *manager);
    if (contract) *contract = managed->contract();
  } else {
    engine.emplace(layout, c.requests, c.scheduler_seed, c.engine);
    planned.emplace(*engine, harness::scheduler_mutant_edit(mutant, *engine));
  }
  harness::OracleSide& scheduled =
      managed ? static_cast<harness::OracleSide&>(*managed) : *planned;
  std::vector<model::Step> steps;
  while (static_cast<std::int64_t>(steps.size()) < steps_max) {
    std::optional<harness::OracleStep> o = scheduled.next();
    if (!o) break;
    steps.push_back(o->step);
    if (o->finding || o->last) break;
  }
  return steps;
}

nlohmann::ordered_json to_json(const EngineOutcome& o) {
  nlohmann::ordered_json j{{"valid", o.valid},
                           {"invalid_reason", o.invalid_reason},
                           {"steps_run", o.steps_run},
                           {"bytes_compared", o.bytes_compared},
                           {"coverage", model::to_json(o.coverage)}};
  if (o.failure) j["failure"] = harness::to_json(*o.failure);
  if (!o.refused_by_manager.empty()) j["refused_by_manager"] = o.refused_by_manager;
  return j;
}

EngineOutcome outcome_from_json(const nlohmann::ordered_json& j) {
  EngineOutcome o{.valid = j.at("valid").get<bool>(),
                  .invalid_reason = j.at("invalid_reason").get<std::string>(),
                  .steps_run = j.at("steps_run").get<std::int64_t>(),
                  .bytes_compared = j.at("bytes_compared").get<std::int64_t>(),
                  .coverage = model::coverage_from_json(j.at("coverage"))};
  if (j.contains("failure")) o.failure = harness::difference_from_json(j.at("failure"));
  o.refused_by_manager = j.value("refused_by_manager", "");
  return o;
}

} // namespace mc::fuzz
