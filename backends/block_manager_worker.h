// A KV cache manager under test in another process (oracle/engine/kv_manager.h): the Python
// adapter's block-manager worker (adapters/python/mambacheck_adapter/block_manager.py), over
// the reference manager, its broken variants, or vLLM's own KVCacheManager
// (docs/block-manager.md, "Protocol").
//
// The command is started once (`/bin/sh -c COMMAND`, its own process group, stderr to a log
// file or inherited) and greets with `mambacheck-block-manager 1 ...`; each call is one JSON
// line, answered by one JSON line or `error: MESSAGE`. A worker that cannot start or greet is
// an environment error (exit 3); one that raises, dies, hangs or answers nonsense during a run
// is a KvManagerFault, a finding against the manager, and is started again for the next run.
#pragma once

#include "model/process.h"
#include "oracle/engine/kv_manager.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mc::backends {

inline constexpr double kBlockManagerTimeoutSecondsDefault = 60.0;

struct BlockManagerOptions {
  std::string command;                  // run by /bin/sh -c
  std::filesystem::path log_file;       // its stderr (appended); empty: inherited
  double timeout_seconds = kBlockManagerTimeoutSecondsDefault; // the greeting, and each call
};

class BlockManagerWorker final : public oracle::engine::KvManager {
public:
  // Starts the command and reads its greeting; model::EnvironmentError when it cannot.
  explicit BlockManagerWorker(BlockManagerOptions options);
  ~BlockManagerWorker() override;
  BlockManagerWorker(const BlockManagerWorker&) = delete;
  BlockManagerWorker& operator=(const BlockManagerWorker&) = delete;

  model::SchedulerContract setup(const oracle::engine::KvSetup& setup) override;
  void new_step_starts() override;
  std::vector<model::BlockCopy> take_block_copies() override;
  std::int32_t get_computed_blocks(const oracle::engine::KvRequest& r) override;
  bool allocate_slots(const oracle::engine::KvRequest& r, std::int32_t num_new_tokens,
                      std::int32_t num_new_computed_tokens, std::int32_t num_lookahead_tokens,
                      oracle::engine::KvAllocation& out) override;
  void free(const oracle::engine::KvRequest& r) override;
  void cache_blocks(const oracle::engine::KvRequest& r, std::int32_t num_tokens) override;
  bool reset_prefix_cache() override;
  std::optional<std::int32_t> aligned_split(const oracle::engine::KvRequest& r,
                                            std::int32_t num_new_tokens,
                                            std::int32_t num_new_computed_tokens) override;
  void output_processed() override;
  void flush() override;
  std::vector<std::pair<std::int32_t, std::int32_t>> referenced_blocks() override;

  const std::string& greeting() const { return greeting_; }
  // Its full-attention groups (greeting attention_groups=N), which take blocks from the pool.
  std::int32_t attention_groups() const override { return attention_groups_; }
  // Greeted split=1: the prefill chunks of align mode are split by the manager's side.
  bool splits() const { return splits_; }
  std::int64_t calls() const { return calls_; }
  std::int64_t restarts() const { return restarts_; }

private:
  void start();
  void stop();
  // One call: the answer object; KvManagerFault for `error:`, death, timeout or garbage. The
  // answers of calls posted before it are read first.
  nlohmann::json call(const nlohmann::json& message, std::string_view what);
  // A call whose answer is {"tokens": N} (hit, split): N.
  std::int32_t call_for_tokens(const nlohmann::json& message, std::string_view what);
  // A call whose answer ({}) nothing waits for (new_step_starts, free, cache_blocks, output):
  // written now, its answer read before the next call's, so a round trip is saved and a
  // failure is still reported against the call that failed.
  void post(const nlohmann::json& message, std::string_view what);
  nlohmann::json read_answer(std::string_view what);
  [[noreturn]] void fault(std::string_view what, std::string message);
  nlohmann::json request_json(const oracle::engine::KvRequest& r);

  BlockManagerOptions options_;
  model::Child child_;
  std::string buffer_;
  std::string greeting_;
  std::int32_t attention_groups_ = 0;
  bool splits_ = false; // greeted split=1: it answers the aligned split (op split)
  bool copies_ = false; // set up with a hash unit below the block size: it may copy (op copies)
  std::vector<std::string_view> posted_; // calls whose answers are still to be read
  bool crashed_ = false;
  std::int64_t calls_ = 0;
  std::int64_t restarts_ = 0;
  // Token ids of each request sent so far (a call sends only the new ones).
  std::unordered_map<std::string, std::size_t> tokens_sent_;
};

} // namespace mc::backends
