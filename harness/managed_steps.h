// The engine level with a KV cache manager under test (docs/block-manager.md): the oracle's
// scheduler model plans every step and makes its KV cache calls on the manager
// (oracle/engine/kv_manager.h), and each step it plans runs on the oracle's Replayer
// (oracle/engine/replay.h), which holds the manager's tables to the contract the manager
// declared, exactly as it holds a recorded trace's. So the steps written as a trace replay to
// the same result without the manager, and a counterexample is a trace.
#pragma once

#include "harness/lockstep.h"
#include "model/layout.h"
#include "model/scheduler_contract.h"
#include "oracle/engine/driver.h"
#include "oracle/engine/kv_manager.h"
#include "oracle/engine/options.h"
#include "oracle/engine/replay.h"
#include "oracle/engine/scheduler.h"
#include "oracle/engine/workload.h"
#include "scenarios/trace.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace mc::harness {

// The setup a run gives the manager: the layout's sizes and the scheduler's drafting.
oracle::engine::KvSetup kv_setup(const model::Layout& layout,
                                 const oracle::engine::EngineOptions& options);
// The tokens an EAGLE/MTP drafter adds to each allocation (vLLM's num_lookahead_tokens).
std::int32_t kv_lookahead(const model::CacheConfig& config,
                          const oracle::engine::EngineOptions& options);

// The attention block size vLLM gives a hybrid model's attention groups (upstream 6a391a931a92,
// vllm/model_executor/models/config.py HybridAttentionMambaModelConfig): in align mode the Mamba
// block is the attention block, and in all mode the attention block is raised to at least the
// Mamba block. A run through a manager has vLLM's geometry: its attention groups get this size,
// whatever the case drew (the drawn size still seeds the model's own runs, where a smaller
// attention block is a bug source of its own). Hash blocks smaller than the Mamba block are
// vLLM's prefix_match_unit, not this.
std::int32_t vllm_attention_block_size(const model::CacheConfig& config);

// A case's geometry as it runs through `kv`: the attention block size above, and the pool.
// vLLM's groups share one pool of ids, where the model gives each Mamba group a pool of
// spec.num_blocks: the shared pool holds that many for every Mamba group (the same pressure),
// plus, for each attention group, room for two of the longest requests' attention tables (one
// request always fits beside another; the pool still runs out under load, which preempts).
// InputError when that passes model::kBlocksMax.
void fit_to_manager(model::CacheConfig& config, model::LayoutSpec& spec,
                    std::span<const oracle::engine::RequestSpec> requests,
                    const oracle::engine::EngineOptions& options,
                    const oracle::engine::KvManager& kv);

// A trace's header for steps planned with a manager: its contract, the scheduling mode.
void set_manager_contract(scenarios::TraceHeader& header, const model::SchedulerContract& contract,
                          bool async_scheduling);

class ManagedSteps final : public OracleSide {
public:
  // Calls kv.setup() (a KvManagerFault escapes: the manager failed before any step).
  ManagedSteps(const model::Layout& layout, std::vector<oracle::engine::RequestSpec> requests,
               std::uint64_t seed, const oracle::engine::EngineOptions& options,
               oracle::engine::KvManager& kv);
  std::optional<OracleStep> next() override;
  oracle::engine::OracleRunner& runner() override { return replayer_->runner(); }
  const oracle::engine::BlockManager& blocks() const override { return replayer_->blocks(); }
  std::optional<std::int64_t> aborts() const override { return scheduler_.stats().aborts; }
  std::int32_t lookahead() const override { return lookahead_; }

  const model::SchedulerContract& contract() const { return contract_; }
  const oracle::engine::SchedulerStats& stats() const { return scheduler_.stats(); }
  // The run's counters as the oracle engine reports them, after `steps` steps (requests left
  // for the caller, who knows the workload).
  oracle::engine::EngineReport report(std::int64_t steps,
                                      std::optional<oracle::engine::Finding> finding) const;

private:
  std::optional<oracle::engine::Finding> plan_and_run();
  std::optional<oracle::engine::Finding> check_pool_whole();
  // A call the manager failed, at the step planned (or run) now.
  oracle::engine::Finding manager_fault(const oracle::engine::KvManagerFault& e);

  bool async_ = false;
  std::int32_t lookahead_ = 0;
  model::SchedulerContract contract_;
  oracle::engine::Scheduler scheduler_;
  std::optional<oracle::engine::Replayer> replayer_;
  model::Step step_;
  bool in_flight_ = false; // async: step_ ran and waits for the scheduler's commit
  bool stopped_ = false;
  oracle::engine::KvManager& kv_;
};

} // namespace mc::harness
