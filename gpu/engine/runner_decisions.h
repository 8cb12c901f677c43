// The decisions the engine runner makes at its mutation points (engine_runner.h), made as
// REFERENCE.md 2 and model/FORWARD.md specify them. The runner asks its RunnerDecisions at
// each point, once per request or step (a virtual call, never one per byte); a runner mutant
// (runner_mutant.h) derives from it and redefines the one decision it gets wrong.
#pragma once

#include "model/config.h"
#include "model/launch.h"
#include "model/step.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::gpu::engine {

// How a slot's entry changes hands (EngineRunner::release and EngineRunner::seed).
enum class SlotHandover : std::uint8_t {
  released,        // its request finished or was preempted
  reused,          // a freed slot taken by another request
  kept_by_resumed, // a resumed request that never lost its slot (force-preempted)
  fresh,           // a new slot, or a kept one by a request that did not resume
};

// What a launch's per-request arrays are indexed by: V1 builds them per batch row, V2 per slot.
enum class ArraysIndexedBy : std::uint8_t { batch_row, slot };

// One block-aligned intermediate state of an all-mode chunk: the state after `pos` tokens goes
// to block-table column `col`.
struct AllModeBoundary {
  std::int32_t col = 0;
  std::int64_t pos = 0;
};

// What an all-mode request keeps of a decode with drafts for its next step: the block of its
// last scheduled token and its drafts (a == 1 + drafts: all accepted).
struct AllModeRecord {
  std::int32_t block = -1; // -1: none
  std::int32_t drafts = 0;
};

class RunnerDecisions {
public:
  virtual ~RunnerDecisions() = default;

  // --- Slots and columns

  // Whether a slot's column and accepted count survive `handover`: never (a new occupant
  // starts without them, and cleanup drops a resumed request's).
  virtual bool keeps_slot_arrays(SlotHandover /*handover*/) const { return false; }
  // The block size the column a request starts from is counted in: the mamba block size.
  virtual std::int32_t prev_column_block_size(const model::CacheConfig& config) const {
    return config.mamba_block_size;
  }
  // The computed count the column a request starts from comes from: c, after its prefix hit.
  virtual std::int32_t prev_column_computed(std::int32_t c, bool /*resumed*/) const { return c; }
  // The column before token c: (c - 1) // B with Python floor division (-1 for c = 0).
  virtual std::int32_t prev_column(std::int32_t c, std::int32_t block_size) const;
  // V1's column after a step ending at token `end`: cdiv(end, B) - 1.
  virtual std::int32_t curr_column(std::int32_t end, std::int32_t block_size) const;

  // --- Preemption

  // A preemption forgets the request's accepted count, so its resume starts without one. The
  // runner reports every preemption and asks at every seed; the answer is never a count.
  virtual void preempted(const std::string& /*req_id*/, std::int32_t /*num_accepted*/) {}
  virtual std::optional<std::int32_t> accepted_at_seed(const std::string& /*req_id*/,
                                                       bool /*resumed*/) {
    return std::nullopt;
  }

  // --- Async scheduling

  // V1 under async scheduling: the accepted counts of the step in flight reach the host in a
  // buffer indexed by that step's input-batch rows, after the next step has condensed its
  // batch (model/input_batch.h). Which row of that buffer a request's count is read from,
  // given the row it had when the count was written and the row it has now: the former.
  virtual std::int32_t accepted_count_row(std::int32_t written, std::int32_t /*now*/) const {
    return written;
  }

  // --- Launches

  // precopy's idx_mapping for the rows of `slots`: each row's own entry in the arrays, its
  // batch row (arrays by batch row) or its slot (arrays by slot).
  virtual std::vector<std::int32_t>
  precopy_idx_mapping(ArraysIndexedBy arrays, const std::vector<std::int32_t>& slots) const;
  // V2 precopy's src_col and token_bias: as preprocess_align wrote them (the bias is a token
  // offset for conv states and a column offset for temporal ones; the kernel applies it).
  virtual void v2_precopy_sources(model::RequestArrays& /*arrays*/) const {}
  // Whether a step with speculative decoding runs the post-step launch: always.
  virtual bool runs_postprocess(const model::Step& /*step*/) const { return true; }
  // The accepted count a row keeps after the post-step launch: the launch's output (a reset to
  // 1 after a save in place of `before`, the count it went in with).
  virtual std::int32_t accepted_after_postprocess(std::int32_t launch_out,
                                                  std::int32_t /*before*/) const {
    return launch_out;
  }

  // --- Forward

  // The intermediate states of an all-mode chunk of n tokens after c: every block boundary
  // strictly inside (c, c + n), (j + 1) * B into column j. The final state is written apart.
  virtual std::vector<AllModeBoundary> all_mode_boundaries(std::int64_t c, std::int64_t n,
                                                           std::int64_t block_size) const;
  // postprocess_mamba_all: what an all-mode request keeps for its next step after a step of n
  // tokens from c, d of them drafts: the block of the last token, max(0, (c + n - 1) // B),
  // where that step anchors its read, and d, after a decode with drafts (d > 0); none after
  // anything else.
  virtual std::optional<AllModeRecord> all_mode_record(std::int32_t c, std::int32_t n,
                                                       std::int32_t d,
                                                       const model::CacheConfig& config) const;

  // --- The forward's metadata (forward_metadata.h)

  // split_decodes_and_prefills: whether a row of n tokens, d of them drafts, is a decode, given
  // the threshold (1 + num_spec with spec decode, else 1) and whether its first token is a
  // prompt token: a query of at most the threshold with one token besides its drafts (here a
  // chunk is always a prefill, model/FORWARD.md). A padded prompt tail (its last token and
  // num_spec placeholder drafts) is a decode: the state after the real token is kept (#55178).
  virtual bool decode_row(std::int32_t n, std::int32_t d, bool prompt_token,
                          std::int32_t threshold) const;

  // Whether a decode row of a run with spec decode carries its accepted count, so that the
  // forward reads its state where the last step's accepted tokens left it: always, whatever
  // the row drafted (d = 0 included). A row off that path reads entry 0, the state before the
  // accepted drafts (vLLM before #56531 marked zero-draft rows -1).
  virtual bool on_spec_path(std::int32_t /*d*/) const { return true; }

  // Align mode: the column a decode row's 1 + num_spec window starts at, for a row whose
  // last scheduled token is token seq_len - 1: (seq_len - 1) // B.
  virtual std::int32_t decode_window_start(std::int32_t seq_len, std::int32_t block_size) const;
  // All mode: the block of the first scheduled token after c computed ones, cdiv(c + 1, B) - 1.
  virtual std::int32_t first_scheduled_block(std::int32_t c, std::int32_t block_size) const;
  // Whether a CUDA-graph step writes the null block into the persistent rows past its decodes:
  // always (else a replay indexes what an earlier, larger batch left there).
  virtual bool pads_graph_rows_with_null() const { return true; }
  // Which entry of a decode row's window its temporal initial state is read from, given the
  // metadata's num_accepted a: a - 1.
  virtual std::int32_t accepted_read_index(std::int32_t num_accepted) const {
    return num_accepted - 1;
  }
  // Whether that index is bounded: taken only where the metadata carries a count (else entry
  // 0) and checked against the row's window before it indexes the step's state-indices
  // tensor: always.
  virtual bool bounds_accepted_read() const { return true; }
  // Whether a CUDA-graph step copies its inputs into the buffers its graph was captured with:
  // always (else the replay runs on what the capture step left there).
  virtual bool updates_graph_buffers_in_place() const { return true; }
  // Whether a batch whose rows all hold 1 + num_spec tokens runs as the spec-verify CUDA graph
  // of its size even where a row is a prefill chunk of that length, with the persistent
  // buffers the builder refreshes only for batches without prefills: never. A step runs as a
  // graph only where the builder's split finds no prefill (vLLM's dispatcher goes by shape,
  // #55766).
  virtual bool dispatches_graph_by_shape() const { return false; }
  // Whether the step's block copies (partial-hash hits: model::Step::block_copies) run before
  // its launches: always (vLLM's copy_kv_cache_blocks_inplace in _update_states).
  virtual bool runs_block_copies() const { return true; }
};

} // namespace mc::gpu::engine
