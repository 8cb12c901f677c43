#include "oracle/engine/options.h"

#include "model/conv_history.h"
#include "model/errors.h"

#include <algorithm>

namespace mc::oracle::engine {
namespace {

void require_range(std::int64_t value, std::int64_t lo, std::int64_t hi, const char* field) {
  if (value < lo || value > hi)
    model::fail_input("engine: {} must be in {}..{}, got {}", field, lo, hi, value);
}

// What the scheduler needs of its options to make progress with this geometry: a pool that
// holds one request, a budget that fits a block-aligned chunk and a whole decode.
void validate_scheduling(const EngineOptions& o, const model::Layout& layout) {
  const model::CacheConfig& c = layout.config;
  const std::int64_t usable = layout.spec.num_blocks - 1;
  const std::int64_t len_max = o.workload.prompt_len_max + o.workload.output_len_max;
  // A partial-hash hit's copy takes one block more at once.
  const bool partial =
      o.scheduler.hash_block_size != 0 && o.scheduler.hash_block_size != c.mamba_block_size;
  const std::int64_t per_request =
      c.mode == model::CacheMode::align
          ? 3 + c.num_spec_blocks + (partial ? 1 : 0)
          : model::cdiv(len_max + 1, c.mamba_block_size) + 1 + c.num_spec_blocks;
  if (usable < per_request)
    model::fail_input("engine: a pool of {} blocks cannot hold one request ({} blocks needed)",
                      layout.spec.num_blocks, per_request + 1);
  if (o.scheduler.token_budget < token_budget_min(c))
    model::fail_input("engine: token_budget {} must be at least {}, the mamba block size {} and "
                      "1 + num_spec_tokens {} (else a block-aligned split never progresses)",
                      o.scheduler.token_budget, token_budget_min(c), c.mamba_block_size,
                      1 + c.num_spec_tokens);
}

// vLLM's hash_block_size: the Mamba block size or a divisor of it, which only align mode's
// partial-hash hits use.
void validate_hash_unit(const SchedulerOptions& s, const model::CacheConfig& c) {
  const std::int32_t h = s.hash_block_size;
  if (h == 0 || h == c.mamba_block_size) return;
  if (h < 0 || h > c.mamba_block_size || c.mamba_block_size % h != 0)
    model::fail_input("engine: hash_block_size {} must divide mamba_block_size {} (0: the block "
                      "size)",
                      h, c.mamba_block_size);
  if (c.mode != model::CacheMode::align)
    model::fail_input("engine: hash_block_size {} below mamba_block_size {} needs align mode "
                      "(partial-hash hits copy align mode's running block)",
                      h, c.mamba_block_size);
  if (s.drafter_prunes_last_block)
    model::fail_input("engine: hash_block_size {} below mamba_block_size {} with an EAGLE drafter "
                      "is not modelled (its hit back-off over partial hits)",
                      h, c.mamba_block_size);
}

} // namespace

void validate_geometry(const model::Layout& layout) {
  const model::CacheConfig& c = layout.config;
  if (c.mode == model::CacheMode::none)
    model::fail_input("mode: none keeps no state blocks to check; use align or all");
  if (c.mode == model::CacheMode::all && c.num_spec_blocks != c.num_spec_tokens)
    model::fail_input("num_spec_blocks: all mode needs num_spec_blocks == num_spec_tokens, got {} "
                      "and {}: a decode keeps the state of each draft prefix in a speculative "
                      "column after its last block (model/FORWARD.md)",
                      c.num_spec_blocks, c.num_spec_tokens);
  if (c.mode == model::CacheMode::align && c.num_spec_tokens >= c.mamba_block_size)
    model::fail_input("num_spec_tokens: {} must be below mamba_block_size {}: a decode of 1 + "
                      "num_spec tokens could then cross two block boundaries in one step, and "
                      "align mode saves at most one block a step",
                      c.num_spec_tokens, c.mamba_block_size);
  if (const std::int32_t t = model::first_conv_without_drafts(layout); t >= 0) {
    const std::int32_t group = layout.tensors[static_cast<std::size_t>(t)].group;
    model::fail_input("num_spec_tokens: group {} ({}) keeps no drafts in its conv window; spec "
                      "decode needs num_spec_tokens 0 for it",
                      group, layout.spec.groups[static_cast<std::size_t>(group)].name);
  }
}

std::int32_t token_budget_min(const model::CacheConfig& config) {
  return std::max(config.mamba_block_size, 1 + config.num_spec_tokens);
}

std::int32_t token_budget_default(const model::CacheConfig& config) {
  return std::max(kTokenBudgetSmall, token_budget_min(config));
}

void validate_options(const EngineOptions& o, const model::Layout& layout) {
  const WorkloadOptions& w = o.workload;
  require_range(w.vocab_size, 2, 1 << 30, "vocab_size");
  require_range(w.prompt_len_min, 1, kSequenceLenMax, "prompt_len_min");
  require_range(w.prompt_len_max, w.prompt_len_min, kSequenceLenMax, "prompt_len_max");
  require_range(w.output_len_min, 1, kSequenceLenMax, "output_len_min");
  require_range(w.output_len_max, w.output_len_min, kSequenceLenMax, "output_len_max");
  require_range(w.num_shared_prefixes, 0, 1 << 10, "num_shared_prefixes");
  require_range(w.shared_prefix_per_million, 0, 1'000'000, "shared_prefix_per_million");
  require_range(w.arrivals_per_step_max, 1, 1 << 10, "arrivals_per_step_max");
  const SchedulerOptions& s = o.scheduler;
  require_range(s.token_budget, 1, kTokenBudgetMax, "token_budget");
  require_range(s.max_running, 1, kRunningMax, "max_running");
  require_range(s.reset_prefix_cache_per_million, 0, 1'000'000, "reset_prefix_cache_per_million");
  require_range(s.abort_per_million, 0, 1'000'000, "abort_per_million");
  require_range(s.full_drafts_per_million, 0, 1'000'000, "full_drafts_per_million");
  require_range(o.runner.row_stride_extra, 0, 1 << 10, "row_stride_extra");
  require_range(o.cache_sweep_every, 1, 1 << 30, "cache_sweep_every");
  try {
    validate_geometry(layout);
  } catch (const model::InputError& e) {
    model::fail_input("engine: {}", e.what());
  }
  validate_hash_unit(s, layout.config);
  validate_scheduling(o, layout);
}

} // namespace mc::oracle::engine
