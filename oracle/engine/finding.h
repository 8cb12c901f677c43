// A broken invariant or a wrong read, as the engine simulation reports it.
//
// Every finding names the step, the request and, where one is involved, the state tensor
// (group, layer, state), the block-table column and the physical block, says what was
// expected, and renders as one line (DESIGN.md, "Counterexamples").
#pragma once

#include "model/errors.h"
#include "model/layout.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace mc::oracle::engine {

enum class FindingKind : std::uint8_t {
  wrong_read,            // the forward read a state that is not the ground truth
  wrong_copy_source,     // a pre-step copy would read a state that is not the ground truth
  wrong_next_state,      // after the step, the state the next step reads is not the ground truth
  wrong_cached_state,    // a block registered for prefix reuse does not hold its boundary state
  bad_write,             // a write to the null block, a freed block, a shared or cached block
  bad_read,              // a copy read a block its request does not hold
  bad_index,             // a column outside the row or a block id outside the arena
  launch_rejected,       // run_launch refused the case (InputError), message attached
  unsupported_copy,      // batch_copy cannot express a copy (DS conv with bias > 0)
  token_mismatch,        // a step schedules tokens that contradict the committed sequence
  inconsistent_step,     // replay: a step contradicts the past (counts, held blocks handed out)
  wrong_prefix_hit,      // a new or resumed request's hit is not the longest cached aligned prefix
  spec_blocks_not_moved, // a growing table leaves an old speculative block before the running one
  excess_retention,      // a request holds a state block its rules have freed (align: stale)
  internal_assertion,    // an assumption of the engine model broke inside the step (MC_ASSERT)
  // Async scheduling (in_flight.h): a block handed out while the step in flight can touch it,
  // and a block written by this step for one request and touched by the step in flight for
  // another.
  in_flight_block_reused,
  in_flight_write_conflict,
  // A KV cache manager under test (kv_manager.h) raised, died, hung or answered nonsense.
  block_manager_fault,
  // A block in no place or in two (BlockManager::check_accounting), at a periodic sweep.
  block_accounting,
};

std::string_view to_string(FindingKind kind);

struct Finding {
  FindingKind kind = FindingKind::wrong_read;
  std::int64_t step = 0;
  std::string req_id;
  std::int32_t tensor = -1; // index into Layout::tensors, -1 when no tensor is involved
  std::int32_t group = -1;
  std::int32_t layer = -1;
  std::int32_t state = -1;
  std::int32_t col = -1;      // block-table column, -1 when none
  std::int32_t block_id = -1; // physical block, -1 when none
  std::string detail;         // what happened
  std::string expected;       // what should have been
  std::string message;        // the one-line rendering of all of the above
};

// Fills group/layer/state from `tensor` (when >= 0) and renders the message.
Finding make_finding(const model::Layout& layout, FindingKind kind, std::int64_t step,
                     std::string req_id, std::int32_t tensor, std::int32_t col,
                     std::int32_t block_id, std::string detail, std::string expected);

// A failed MC_ASSERT inside a step (model::AssertionsReported) as a finding of that step.
Finding internal_assertion(const model::Layout& layout, std::int64_t step,
                           const model::AssertionFailure& failure);

} // namespace mc::oracle::engine
