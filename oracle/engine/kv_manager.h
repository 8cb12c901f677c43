// A KV cache manager under test, in place of the scheduler model's own BlockManager
// (docs/block-manager.md): the scheduler model keeps deciding what runs (requests, chunks,
// drafts, acceptance, preemption, aborts, resets) and makes on it the calls vLLM's Scheduler
// makes on KVCacheManager (vllm/v1/core/sched/scheduler.py at upstream 6a391a931a92), in the
// same order. The tables it answers are not trusted: the steps they make are judged by the
// Replayer (replay.h), as a recorded trace's are, under the contract the manager declares.
#pragma once

#include "model/step.h"
#include "model/scheduler_contract.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mc::oracle::engine {

// One request as vLLM's Request object shows it to the manager.
struct KvRequest {
  std::string_view id;
  std::span<const std::int32_t> tokens; // every token known: prompt and sampled outputs
  std::int32_t num_prompt = 0;          // the prompt's tokens, the first of `tokens`
  std::int32_t num_computed = 0;        // optimistic under async (the step in flight counted)
  std::int32_t num_in_flight = 0;       // scheduled tokens of the step in flight
  std::int32_t placeholders = 0;        // outputs of the step in flight not known yet
};

// allocate_slots' answer, per group: the blocks it appended (a new or resumed request: its
// whole table) and the whole table it holds now, for the Mamba groups and the attention groups.
struct KvAllocation {
  model::GroupBlockIds appended;
  model::GroupBlockIds held;
  model::GroupBlockIds attention_appended;
  model::GroupBlockIds attention_held;
};

// The sizes a manager is set up with for one run.
struct KvSetup {
  std::int32_t block_size = 0;           // the Mamba groups'
  std::int32_t attention_block_size = 0; // the attention groups' (vLLM: B in align mode)
  std::int32_t num_spec_blocks = 0;
  bool all_mode = false;       // mamba_cache_mode "all" (else "align")
  std::int32_t mamba_groups = 1;
  std::int32_t num_blocks = 0; // its pool: ids 1 .. num_blocks - 1 (0 is the null block)
  bool eagle = false;          // EAGLE/MTP drafting: lookahead and the hit's dropped block
  bool async_scheduling = false;
  // A writer not ordered with the steps (V2's deferred postprocess): vLLM's defer_block_free,
  // a request's blocks freed while a step is in flight are given back once its output came.
  bool defer_block_free = false;
  std::int32_t max_model_len = 0;
  std::int32_t max_num_scheduled_tokens = 0; // the step's token budget
  // vLLM's hash_block_size: prefix hashes every N tokens (0: every block). Below block_size,
  // align mode's partial-hash hits, with copy-on-write copies (take_block_copies).
  std::int32_t hash_block_size = 0;
};

// The manager refuses the sizes of a run (a configuration it cannot serve): not a finding; a
// command exits 2, a campaign counts the case as refused.
struct KvManagerRefusal {
  std::string reason;
};

// The manager under test failed a call: it raised, answered nonsense, died or hung. A finding
// against the manager at the step being planned, never the tool's crash.
struct KvManagerFault {
  std::string message;
};

class KvManager {
public:
  virtual ~KvManager() = default;
  // A fresh manager for one run; the contract its tables are judged by. KvManagerRefusal when
  // it cannot serve these sizes.
  virtual model::SchedulerContract setup(const KvSetup& setup) = 0;
  virtual void new_step_starts() = 0;
  // take_kv_cache_block_copies, once the step is planned: the copies it runs before its
  // kernels (partial-hash hits), group being the Mamba group. The manager keeps both ends of
  // each until the step ran, as vLLM's scheduler does (_free_cow_retained_blocks).
  virtual std::vector<model::BlockCopy> take_block_copies() = 0;
  // get_computed_blocks: the tokens a new or resumed request's prefix hit covers.
  virtual std::int32_t get_computed_blocks(const KvRequest& r) = 0;
  // allocate_slots; false: None (the scheduler preempts, or admits nothing more).
  virtual bool allocate_slots(const KvRequest& r, std::int32_t num_new_tokens,
                              std::int32_t num_new_computed_tokens,
                              std::int32_t num_lookahead_tokens, KvAllocation& out) = 0;
  // `r.num_in_flight`: the tokens of the rows of r that a step not completed yet still runs
  // (stale ones included), so that a manager that defers frees knows which to defer.
  virtual void free(const KvRequest& r) = 0;
  virtual void cache_blocks(const KvRequest& r, std::int32_t num_tokens) = 0;
  // Async: the output of the step in flight was processed (update_from_output), before any
  // cache_blocks of it; frees deferred until then may be given back.
  virtual void output_processed() = 0;
  // Calls whose answers nothing waited for are done and judged (a manager may answer them
  // late: KvManagerFault for one that failed). Once a step was planned and committed.
  virtual void flush() = 0;
  virtual bool reset_prefix_cache() = 0;
  // vLLM's Scheduler._mamba_block_aligned_split, asked of the manager's side for a prefill
  // chunk in align mode: how many of `num_new_tokens` the chunk keeps (`num_new_computed_tokens`:
  // an admitted request's hit, `r` then counting none computed). nullopt: the manager leaves
  // the split to the scheduler model. The split decides where align mode caches states, and
  // vLLM's own has had its bugs (#43559), so a manager that can run vLLM's answers here.
  virtual std::optional<std::int32_t> aligned_split(const KvRequest& r,
                                                    std::int32_t num_new_tokens,
                                                    std::int32_t num_new_computed_tokens) {
    (void)r, (void)num_new_tokens, (void)num_new_computed_tokens;
    return std::nullopt;
  }
  // Its full-attention groups, known before setup: their blocks come from the same pool, which
  // must then hold them too (harness/managed_steps.h fit_to_manager).
  virtual std::int32_t attention_groups() const = 0;
  // The blocks its pool counts as referenced (block id, reference count), the null block
  // aside, in id order: once every request finished, none (the pool is whole).
  virtual std::vector<std::pair<std::int32_t, std::int32_t>> referenced_blocks() = 0;
};

} // namespace mc::oracle::engine
