// The scheduler model's steps with a KV cache manager under test (managed_steps.h).
#include "harness/managed_steps.h"

#include "model/block_copy.h"
#include "model/errors.h"
#include "model/prng.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::harness {

std::int32_t kv_lookahead(const model::CacheConfig& config,
                          const oracle::engine::EngineOptions& options) {
  return options.scheduler.drafter_prunes_last_block ? config.num_spec_tokens : 0;
}

std::int32_t vllm_attention_block_size(const model::CacheConfig& config) {
  return config.mode == model::CacheMode::align
             ? config.mamba_block_size
             : std::max(config.attn_block_size, config.mamba_block_size);
}

oracle::engine::KvSetup kv_setup(const model::Layout& layout,
                                 const oracle::engine::EngineOptions& options) {
  return {.block_size = layout.config.mamba_block_size,
          .attention_block_size = layout.config.attn_block_size,
          .num_spec_blocks = layout.config.num_spec_blocks,
          .all_mode = layout.config.mode == model::CacheMode::all,
          .mamba_groups = layout.num_groups(),
          .num_blocks = static_cast<std::int32_t>(layout.spec.num_blocks),
          .eagle = options.scheduler.drafter_prunes_last_block,
          .async_scheduling = options.scheduler.async_scheduling,
          .defer_block_free =
              options.scheduler.async_scheduling &&
              model::postprocess_writes_out_of_order(options.runner, layout.config.num_spec_tokens),
          .max_model_len = oracle::engine::kSequenceLenMax,
          .max_num_scheduled_tokens = options.scheduler.token_budget,
          .hash_block_size = options.scheduler.hash_block_size};
}

void fit_to_manager(model::CacheConfig& config, model::LayoutSpec& spec,
                    std::span<const oracle::engine::RequestSpec> requests,
                    const oracle::engine::EngineOptions& options,
                    const oracle::engine::KvManager& kv) {
  config.attn_block_size = vllm_attention_block_size(config);
  std::int32_t longest = 0;
  for (const oracle::engine::RequestSpec& r : requests)
    longest = std::max(longest, r.max_len);
  const std::int64_t lookahead = kv_lookahead(config, options);
  const std::int64_t per_request =
      model::cdiv(longest + config.num_spec_tokens + lookahead, std::max(config.attn_block_size, 1));
  const std::int64_t mamba_groups = model::build_layout(config, spec).num_groups();
  const std::int64_t blocks = (spec.num_blocks - 1) * mamba_groups + 1 +
                              2 * per_request * kv.attention_groups();
  if (blocks > model::kBlocksMax)
    model::fail_input("--block-manager: its {} attention groups need a pool of {} blocks for "
                      "these requests, more than {}",
                      kv.attention_groups(), blocks, model::kBlocksMax);
  spec.num_blocks = blocks;
}

void set_manager_contract(scenarios::TraceHeader& header, const model::SchedulerContract& contract,
                          bool async_scheduling) {
  header.async_scheduling = async_scheduling;
  header.contract = contract;
  header.version = scenarios::kTraceFormatVersionContract;
  scenarios::set_hash_unit(header, contract.hash_block_size);
}

ManagedSteps::ManagedSteps(const model::Layout& layout,
                           std::vector<oracle::engine::RequestSpec> requests, std::uint64_t seed,
                           const oracle::engine::EngineOptions& options,
                           oracle::engine::KvManager& kv)
    : async_(options.scheduler.async_scheduling), lookahead_(kv_lookahead(layout.config, options)),
      contract_(kv.setup(kv_setup(layout, options))),
      // The seed as the oracle engine mixes it: the same case draws the same steps.
      scheduler_(layout, options.scheduler, std::move(requests), model::mix64(seed + 1),
                 options.structures),
      kv_(kv) {
  scheduler_.use_manager(kv, lookahead_);
  replayer_.emplace(layout, options.runner, options.cache_sweep_every, options.structures, async_,
                    contract_);
}

std::optional<oracle::engine::Finding> ManagedSteps::plan_and_run() {
  const std::int64_t index = scheduler_.stats().steps;
  bool planned = false;
  try {
    const model::AssertionsReported reported;
    model::Step step = scheduler_.schedule(async_ ? model::Step{} : std::move(step_));
    planned = true;
    if (async_) {
      if (in_flight_) scheduler_.update(step_);
      in_flight_ = false;
      scheduler_.finalize(step);
    }
    step_ = std::move(step);
    kv_.flush();
    model::validate_block_copies(replayer_->runner().layout(), step_.block_copies);
  } catch (const oracle::engine::KvManagerFault& e) {
    if (!planned) step_ = model::Step{.index = index};
    return manager_fault(e);
  } catch (const model::AssertionFailure& e) {
    if (!planned) step_ = model::Step{.index = index};
    return oracle::engine::internal_assertion(replayer_->runner().layout(), step_.index, e);
  } catch (const model::InputError& e) { // the copies it answered are outside the pool
    return manager_fault(oracle::engine::KvManagerFault{e.what()});
  }
  if (std::optional<oracle::engine::Finding> f = replayer_->step(step_)) return f;
  try {
    if (async_) {
      in_flight_ = true;
    } else {
      scheduler_.update(step_);
      kv_.flush();
    }
  } catch (const oracle::engine::KvManagerFault& e) {
    return manager_fault(e);
  }
  return scheduler_.done() ? check_pool_whole() : std::nullopt;
}

oracle::engine::Finding
ManagedSteps::manager_fault(const oracle::engine::KvManagerFault& e) {
  return oracle::engine::make_finding(replayer_->runner().layout(),
                                      oracle::engine::FindingKind::block_manager_fault,
                                      step_.index, "", -1, -1, -1, e.message,
                                      "an answer to every call of vLLM's scheduler");
}

// Every request finished (its frees made, every output processed): the manager's own pool
// must hold no reference. A block it still counts is a leak the tables cannot show: the
// shadow frees what the tables drop, the manager keeps its count.
std::optional<oracle::engine::Finding> ManagedSteps::check_pool_whole() {
  const model::Layout& layout = replayer_->runner().layout();
  std::vector<std::pair<std::int32_t, std::int32_t>> held;
  try {
    if (async_) kv_.output_processed(); // the last step's: frees deferred to it come back
    kv_.flush();
    held = kv_.referenced_blocks();
  } catch (const oracle::engine::KvManagerFault& e) {
    return manager_fault(e);
  }
  if (held.empty()) return std::nullopt;
  std::string blocks;
  for (std::size_t i = 0; i < held.size() && i < 8; ++i)
    blocks += fmt::format("{}block {} ({} references)", i > 0 ? ", " : "", held[i].first,
                          held[i].second);
  if (held.size() > 8) blocks += fmt::format(" and {} more", held.size() - 8);
  return oracle::engine::make_finding(
      layout, oracle::engine::FindingKind::block_accounting, step_.index, "", -1, -1, -1,
      fmt::format("every request has finished, but the block manager's pool still counts {} "
                  "blocks as referenced: {}",
                  held.size(), blocks),
      "the pool whole once every request finished: no block referenced");
}

std::optional<OracleStep> ManagedSteps::next() {
  if (stopped_ || scheduler_.done()) return std::nullopt;
  std::optional<oracle::engine::Finding> finding = plan_and_run();
  stopped_ = finding.has_value();
  return OracleStep{.step = step_,
                    .record = replayer_->last_record(),
                    .finding = std::move(finding),
                    .last = stopped_ || scheduler_.done()};
}

oracle::engine::EngineReport
ManagedSteps::report(std::int64_t steps, std::optional<oracle::engine::Finding> finding) const {
  const oracle::engine::SchedulerStats& s = scheduler_.stats();
  const oracle::engine::ReplayStats& r = replayer_->stats();
  return {.steps = steps,
          .request_steps = s.request_steps,
          .tokens = s.tokens,
          .finished = s.finished,
          .aborts = s.aborts,
          .preemptions = s.preemptions,
          .forced_preemptions = s.forced_preemptions,
          .resets = s.resets,
          .prefix_hits = s.prefix_hits,
          .copies_by_kind = r.copies_by_kind,
          .launches = r.launches,
          .bytes_checked = r.bytes_checked,
          .first_finding = std::move(finding)};
}

} // namespace mc::harness
