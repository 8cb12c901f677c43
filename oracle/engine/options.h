// Knobs of one engine run: workload, scheduler, runner flavour.
//
// Every count has a limit (STYLE.md); validate_options rejects what a user can get wrong
// with an InputError naming the field. Probabilities are per million so that runs stay
// integer-exact and replay the same everywhere.
#pragma once

#include "model/layout.h"
#include "model/runner_options.h"
#include "oracle/engine/structures.h"

#include <cstdint>

namespace mc::oracle::engine {

// The workload: prompts sharing prefixes (so prefix hits happen), a true continuation each.
struct WorkloadOptions {
  std::int32_t vocab_size = 512;
  std::int32_t prompt_len_min = 1;
  std::int32_t prompt_len_max = 40;
  std::int32_t output_len_min = 1;
  std::int32_t output_len_max = 40;
  std::int32_t num_shared_prefixes = 3;             // distinct prefix families
  std::int32_t shared_prefix_per_million = 600'000; // chance a prompt starts with one
  std::int32_t arrivals_per_step_max = 2;           // new requests arriving per step
};

inline constexpr std::int32_t kTokenBudgetSmall = 32;

struct SchedulerOptions {
  std::int32_t token_budget = kTokenBudgetSmall; // tokens per step (max_num_batched_tokens)
  std::int32_t max_running = 8;                  // max_num_seqs
  std::int32_t reset_prefix_cache_per_million = 0;
  std::int32_t abort_per_million = 0;
  std::int32_t full_drafts_per_million = 800'000; // else 0..num_spec-1 drafts
  // Async scheduling (REFERENCE.md 3): each step is planned while the one before it runs, from
  // optimistic counts; a block that step can still touch is held back when freed.
  bool async_scheduling = false;
  bool drafter_prunes_last_block = false;         // eagle: last cache position one block earlier
  // A prompt's last token, scheduled alone with spec decode on, goes with num_spec placeholder
  // drafts, always rejected, so the batch keeps the uniform 1 + num_spec shape of its CUDA
  // graph (vLLM's pad_spec_decode; the Mamba side must keep the state after the real token,
  // #55178).
  bool pad_prompt_tails = false;
  // Tokens per prefix hash (vLLM's hash_block_size; 0: the Mamba block size B). Below B, a
  // divisor of it in align mode: hits end on its multiples, and a chunk stops on the prompt's last
  // multiple of it to cache that partial tail (block_manager.h, partial-hash hits).
  std::int32_t hash_block_size = 0;
};

using model::RunnerOptions;
using model::V1CopyPath;

struct EngineOptions {
  WorkloadOptions workload;
  SchedulerOptions scheduler;
  RunnerOptions runner;
  std::int32_t cache_sweep_every = 64; // full check of every cached block every N steps
  // The oracle's own speed structures, fast or plain (structures.h): the same run either way.
  Structures structures = Structures::fast;
};

inline constexpr std::int32_t kRequestsMax = 1 << 20;
inline constexpr std::int64_t kStepsMax = std::int64_t{1} << 32;
inline constexpr std::int32_t kSequenceLenMax = 1 << 20;
inline constexpr std::int32_t kTokenBudgetMax = 1 << 20;
inline constexpr std::int32_t kRunningMax = 1 << 14;

// Throws InputError naming the field; `layout` is the geometry of the run. Checks the option
// ranges, validate_geometry, and that the scheduler can make progress (pool, token budget).
void validate_options(const EngineOptions& options, const model::Layout& layout);

// What the engine model can run at all, whoever scheduled the steps: align or all mode, one
// speculative block per draft (both modes), fewer drafts than the block size in align mode,
// conv windows that hold the drafts. This is all a replay checks: its steps are given, so
// scheduling options (token budget, arrival rates, workload lengths) never apply to it. Throws
// InputError whose text starts with the config field.
void validate_geometry(const model::Layout& layout);

// The smallest token budget with which a block-aligned split and a whole decode both fit.
std::int32_t token_budget_min(const model::CacheConfig& config);
// The budget `run` and the fuzzer use unless told: 32, or the minimum where that is more.
std::int32_t token_budget_default(const model::CacheConfig& config);

} // namespace mc::oracle::engine
