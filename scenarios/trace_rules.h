// The rules every step of a trace obeys (FORMAT.md, "Rules"), checked one step at a time.
//
// StepChecker keeps the set of live requests (arrived and not finished), so its memory grows
// with the requests in flight and never with the number of steps. check() either throws
// FieldError naming the first broken rule (the field path uses the JSON names, which are
// model::Step's member names) or commits the step: arrivals join the live set, preempted
// requests must come back resumed, finished ones leave. The reader runs it on every line
// read; the writer on every step written, so a written trace always reads back.
#pragma once

#include "model/step.h"
#include "scenarios/trace.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::scenarios {

class StepChecker {
public:
  // The rules of `header`'s trace: its pools (blocks per group: ids 0..size-1 are valid, 0 the
  // null block), steps planned during another only with async_scheduling, its hash unit.
  explicit StepChecker(const TraceHeader& header);

  void check(const model::Step& step);
  std::size_t num_live() const { return live_.size(); }

private:
  struct Live {
    std::int64_t arrival_step = 0;
    bool must_resume = false; // preempted (or force-preempted by a reset), not yet resumed
  };
  enum class Role : std::uint8_t { arrived, cached };
  struct InStep {
    Role role = Role::arrived;
    std::size_t list_index = 0; // into new_requests or cached_requests
    bool scheduled = false;
  };
  using StepRequests = std::unordered_map<std::string, InStep>;

  void check_new(const model::Step& step, StepRequests& in_step) const;
  void check_cached(const model::Step& step, StepRequests& in_step) const;
  void check_scheduled(const model::Step& step, StepRequests& in_step) const;
  void check_row(const model::ScheduledRequest& row, std::size_t index) const;
  void check_row_against_entry(const model::Step& step, const model::ScheduledRequest& row,
                               std::size_t index, const InStep& entry) const;
  void check_departures(const model::Step& step, const StepRequests& in_step) const;
  // `path` spells out the field's path, called only when a rule is broken.
  void check_blocks(const model::GroupBlockIds& ids,
                    const std::function<std::string()>& path) const;
  void commit(const model::Step& step);

  void check_copies(const model::Step& step) const;
  void check_planned(const model::Step& step) const;

  model::CacheConfig config_;
  std::vector<std::int32_t> pool_sizes_;
  bool async_ = false;
  std::int32_t hit_unit_ = 0; // a prefix hit ends on a multiple: the hash unit, or B
  const char* hit_unit() const {
    return hit_unit_ == config_.mamba_block_size ? "mamba_block_size" : "hash_block_size";
  }
  const char* hit_boundary() const {
    return hit_unit_ == config_.mamba_block_size ? "block boundary" : "hash boundary";
  }
  std::unordered_map<std::string, Live> live_;
  std::optional<std::int64_t> last_index_;
};

} // namespace mc::scenarios
