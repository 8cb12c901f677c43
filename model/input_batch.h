// vLLM V1's persistent input batch, as far as rows go (gpu_input_batch.py's InputBatch): each
// scheduled request holds a row; a step removes the rows of requests it does not schedule
// (finished, preempted, or just not scheduled), puts new ones into the lowest free rows, then
// condense() moves the last rows into whatever holes are left, so the rows stay packed.
// Arrays indexed by row (the accepted counts an async step copies to the host) describe the
// batch of the step that wrote them: a request read at its row after a condense reads another
// request's entry (vLLM #53919, #51571). Geometry only: which row a runner reads is its
// decision.
#pragma once

#include "model/step.h"

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::model {

class InputBatchRows {
public:
  // The rows of the next step, whose scheduled requests are `req_ids` (in any order).
  void update(std::span<const std::string> req_ids);
  // The same for a step's rows.
  void update(std::span<const ScheduledRequest> scheduled);

  // The request's row; -1 when it has none.
  std::int32_t row_of(const std::string& req_id) const;
  // The request in `row`; empty for a hole or a row past the batch.
  const std::string& at(std::int32_t row) const;
  std::int32_t size() const { return static_cast<std::int32_t>(rows_.size()); }

private:
  std::vector<std::string> rows_; // "" in a hole (none are left after update)
  std::unordered_map<std::string, std::int32_t> index_;
};

} // namespace mc::model
