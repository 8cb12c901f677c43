// The attention groups of a recorded hybrid scheduler (model::SchedulerContract::
// attention_groups), as far as a replay of its Mamba groups needs them: which block-aligned
// prefixes their prefix cache holds, since vLLM's hybrid hit is the rightmost cached Mamba
// boundary at or below theirs, and which blocks they take from the pool they share with the
// Mamba groups (a block taken loses the cache entry it held for any group). Without their
// tables in the trace (prefixes_only), the prefixes the requests registered stand for what
// the attention groups cached, none of them evicted.
#pragma once

#include "model/stamps.h"
#include "model/step.h"

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::oracle::engine {

class AttentionShadow {
public:
  AttentionShadow(std::int32_t num_groups, std::int32_t block_size);
  static AttentionShadow prefixes_only(std::int32_t block_size);

  bool active() const { return num_groups_ > 0; }
  std::int32_t block_size() const { return block_size_; }
  // vLLM's hash_block_size below the block size: a prompt's partial tail (its last multiple of
  // `unit` tokens, inside a block) is cached too, and hits end on multiples of `unit`.
  void set_hash_unit(std::int32_t unit) { hash_unit_ = unit; }

  // A new or resumed request's tables: blocks before `hit_tokens` are prefix-cache hits (still
  // cached), the others taken from the pool; the taken ones are appended to `taken`.
  void start(const std::string& req_id, const model::GroupBlockIds& tables,
             std::int32_t hit_tokens, std::vector<std::int32_t>& taken);
  // A running request's appended blocks, all taken.
  void grow(const std::string& req_id, const model::GroupBlockIds& appended,
            std::vector<std::int32_t>& taken);
  // Finished or preempted: its blocks stay cached.
  void drop(const std::string& req_id) { tables_.erase(req_id); }
  void reset();                         // reset_prefix_cache

  // Registers the full blocks of the request's tables that `num_tokens` tokens cover: block p
  // holds the prefix of (p + 1) * block_size tokens, hashes[(p + 1) * block_size]. With a hash
  // unit, also the prompt's partial tail once `num_tokens` reach it: its block's KV is
  // append-only, so it holds that prefix from then on (vLLM's base cache_blocks,
  // _cache_partial_tail_block, single_type_kv_cache_manager.py at 6a391a931a92).
  void register_blocks(const std::string& req_id, std::span<const model::TokenHash> hashes,
                       std::int32_t num_tokens, std::int32_t num_prompt);
  // Block `block_id` was taken by some group: the prefix it held here is gone.
  void evict(std::int32_t block_id);

  // The longest prefix, a multiple of block_size and at most `cap` tokens, whose every block
  // every group holds cached; with a hash unit, then the longest partial entry inside the
  // next block (vLLM's FullAttentionManager.find_longest_cache_hit, fine-grained).
  std::int32_t longest_hit(std::span<const model::TokenHash> hashes, std::int32_t cap) const;

private:
  struct Tables {
    model::GroupBlockIds groups;
    std::int32_t registered = 0; // tokens whose full blocks are registered
  };
  void note_taken(const std::vector<std::int32_t>& ids, std::size_t from,
                  std::vector<std::int32_t>& taken);

  std::int32_t num_groups_ = 0;
  std::int32_t block_size_ = 1;
  std::int32_t hash_unit_ = 0;
  bool tables_known_ = true; // false: prefixes_only
  std::unordered_map<std::string, Tables> tables_;
  // Per group: the prefix each cached block holds, and how many blocks hold each prefix (vLLM
  // keeps several blocks per hash).
  std::vector<std::unordered_map<std::int32_t, model::TokenHash>> by_block_;
  std::vector<std::unordered_map<std::int32_t, model::TokenHash>> partial_by_block_;
  std::vector<std::unordered_map<model::TokenHash, std::int32_t>> holders_;
};

} // namespace mc::oracle::engine
