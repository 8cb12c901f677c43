// What a recorded scheduler promises about its block manager, beyond its tables: the rules a
// replay holds the tables to where schedulers legitimately differ (scenarios/FORMAT.md, the
// header's `scheduler`; docs/replay.md). The defaults are mambacheck's own engine model.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mc::model {

enum class CacheRegistration : std::uint8_t {
  // A row's boundary blocks are registered for prefix reuse when its step's output is
  // committed (mambacheck's engine; under async after the next step was planned).
  after_commit,
  // As vLLM's KVCacheManager (6a391a9): allocate_slots registers the boundaries of the tokens
  // it schedules that are known (drafts and placeholders excluded) when it plans the step,
  // before the step runs; under async the output of a running request registers what it
  // verified as well (AsyncScheduler._update_request_with_output). A block is hit only from
  // the next planning on (MambaManager's same-step guard).
  at_schedule,
};

std::string_view to_string(CacheRegistration r);
std::optional<CacheRegistration> find_cache_registration(std::string_view name);

struct SchedulerContract {
  CacheRegistration registration = CacheRegistration::after_commit;
  // EAGLE/MTP drafting: the hybrid coordinator drops the last block of the attention group's
  // hit so the drafter recomputes it, and the Mamba hit is the rightmost cached boundary at or
  // below that (vLLM kv_cache_coordinator.py HybridKVCacheCoordinator.find_longest_cache_hit,
  // single_type_kv_cache_manager.py FullAttentionManager).
  bool eagle = false;
  // A writer of state blocks that is not ordered with the steps (a KV connector's loads, a
  // deferred postprocess): no block the step in flight can touch may be handed out or hit
  // until it completes. Without one the steps run in order on one stream, and vLLM frees a
  // block at once, even while the step in flight names it (block_pool.py free_blocks).
  bool unordered_writer = false;
  // Full-attention groups whose tables the trace carries (attention_block_ids of its new and
  // cached requests). With them the hit is the rightmost cached Mamba boundary at or below the
  // attention groups' hit, which evictions shorten too.
  std::int32_t attention_groups = 0;
  // Every group, attention and Mamba, takes its blocks from one pool of num_blocks ids (vLLM's
  // BlockPool, one per coordinator): a block one group takes loses the prefix-cache entry it
  // held for another, and no block is held by two groups.
  bool shared_pool = false;
  // vLLM's hash_block_size, the tokens a prefix hash covers (0: the Mamba block size). Below
  // the block size (align mode), a hit may end on any multiple of it, a prompt's last partial
  // block is cached, and those hits are copied on write: the steps then carry block_copies
  // (oracle/engine/block_manager.h, partial-hash hits).
  std::int32_t hash_block_size = 0;

  bool operator==(const SchedulerContract&) const = default;
};

} // namespace mc::model
