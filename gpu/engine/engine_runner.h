// The GPU side of the engine simulation (DESIGN.md, "Engine level"), written at the level of
// the kernels: per-request slots with int32 arrays, block tables as int32 rows with a row
// stride, and every launch and the synthetic forward run through an Executor (host or cuda)
// whose arenas live for the whole run.
//
// Per step (REFERENCE.md 2, model/FORWARD.md), in the runner's order:
// - V1: cleanup (finished, preempted AND resumed lose their column and accepted count), the
//   pre-step columns (prev = kept column or (c - 1) // B, curr = cdiv(c + s, B) - 1), the
//   copy launch (batch_copy or fused precopy) when some row copies, the forward, then the
//   postprocess launch when num_spec > 0;
// - V1 with vLLM's fused path (precopy_v1): the pre-step launch on every step with rows,
//   src_col -1 and bias 0 on the rows that copy nothing;
// - V2: slots reused by later requests (freed on finish and preemption, seeded with
//   (c - 1) // B for new and resumed requests), preprocess_align, precopy when some row
//   copies, the forward, postprocess_align when num_spec > 0; the copy launches get the
//   batch's tables (or, with per-slot tables, every slot's), a deferred postprocess the
//   batch's rows in another step's order;
// - all mode: the forward alone, reading each row's initial state from the block its last
//   decode with drafts recorded (else at the block of its last computed token), then the records
//   for the next step (postprocess_mamba_all).
// The record of a step (launches with decisions and arrays) is what the oracle's StepRecord
// holds; the comparison lives in fuzz/engine.
#pragma once

#include "gpu/engine/executor.h"
#include "gpu/engine/forward_metadata.h"
#include "gpu/engine/runner_decisions.h"
#include "gpu/engine/runner_mutant.h"
#include "model/input_batch.h"
#include "model/launch.h"
#include "model/runner_options.h"
#include "model/step.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mc::gpu::engine {

using model::LaunchRecord;
using model::V1CopyPath;

// The options both runners share (model/runner_options.h), and the deliberate bugs this side
// can be run with.
struct RunnerOptions : model::RunnerOptions {
  RunnerMutant mutant = RunnerMutant::none; // a deliberate bookkeeping bug (runner_mutant.h)
  Mutant kernel_mutant = Mutant::none;      // the executor's kernels (gpu/mutant.h)
};

// A read of the forward that went wrong: the state it found where the metadata pointed
// differed from the state the row starts from, or the index it took lay outside the row's
// window (model/FORWARD.md, "What the GPU side reads").
struct ForwardReadFinding {
  // "forward-read": this program's forward read a wrong state; "forward-kernel": the module's
  // own forward kernels read or wrote a block the metadata does not say (forward_kernels.h).
  std::string kind = "forward-read";
  std::int32_t batch_row = -1;
  std::int32_t tensor = -1; // -1: the index, before any tensor was read
  std::int32_t col = -1;    // block-table column read
  std::int32_t block = -1;
  std::string text; // names the row, the column, what it held and what it should have held
};

struct StepRecord {
  std::int64_t step = 0;
  model::ForwardMetadata metadata; // the metadata the forward ran with (forward_metadata.h)
  std::optional<ForwardReadFinding> forward_read; // the first wrong read of the forward
  std::vector<LaunchRecord> launches;
  bool stopped = false; // a launch was unsupported or rejected: the step ended there
  std::string rejected; // the InputError of a rejected launch
};

class EngineRunner {
public:
  // With `external`, its executor runs the launches (the kind is then ignored).
  EngineRunner(const model::Layout& layout, const RunnerOptions& options, model::Backend kind,
               ExecutorSource* external = nullptr);

  StepRecord execute(const model::Step& step);

  const model::Layout& layout() const { return layout_; }
  const std::vector<model::Arena>& arenas() { return executor_->arenas(); }
  std::vector<std::int64_t> compare(const model::ExpectedStates& expected) {
    return executor_->compare(expected);
  }
  bool compares_where_bytes_are() const { return executor_->compares_where_bytes_are(); }
  std::vector<std::span<const std::byte>> read(std::span<const model::ArenaRange> ranges) {
    return executor_->read(ranges);
  }

private:
  struct Request { // by request slot
    std::string req_id;
    model::GroupBlockIds row;      // the block-table row per group
    std::int32_t state_idx = -1;   // V1: -1 = no mamba_state_idx entry
    std::int32_t num_accepted = 1; // V1: kept from the previous step
    bool has_accepted = false;     // V1: an entry exists
    std::int32_t num_computed = 0;
    std::int32_t src_col = -1;   // V2: preprocess_align out, precopy in
    std::int32_t token_bias = 0; // V2
    bool resumed = false;        // came back in resumed ids this step
    // All mode: what its last step recorded for this one (block -1: none); num_accepted above
    // is then that step's a.
    AllModeRecord all_record;
  };
  struct Batch; // the step's per-row arrays

  std::int32_t slot_of(const std::string& req_id) const;
  std::int32_t take_slot(const std::string& req_id);
  void release(const std::string& req_id);
  void seed(const std::string& req_id, const model::GroupBlockIds& row, std::int32_t c,
            bool resumed);
  std::int32_t prev_column(std::int32_t c, bool resumed) const;
  void apply_rows(const model::Step& step);
  void commit_tokens(const model::Step& step, const Batch& batch);
  // The block tables a launch is handed (model/runner_options.h): the batch's rows in batch
  // order, in the order a later step gathered them (a deferred postprocess), or every slot's.
  enum class Tables : std::uint8_t { batch, deferred_batch, slots };
  model::BlockTables make_tables(const std::vector<const model::GroupBlockIds*>& rows) const;
  model::BlockTables tables_for(const Batch& batch, Tables tables) const;
  bool launch(StepRecord& rec, const Batch& batch, model::LaunchKind kind, std::int32_t num_slots,
              model::RequestArrays arrays, Tables tables = Tables::batch, bool deferred = false);
  // The step's metadata from each row's a as the forward starts (all mode: and its record),
  // then the forward through it.
  void run_forward(StepRecord& rec, const Batch& batch,
                   const std::vector<std::int32_t>& num_accepted,
                   const std::vector<AllModeRecord>& all_record = {});
  struct RowForward; // one metadata row's read and writes (runner_forward.cpp)
  struct RowOps {    // one metadata row's share of the forward, its tokens counted from 0
    std::vector<ForwardOp> ops;
    std::vector<ForwardRead> reads;
    std::vector<std::int32_t> tokens;
  };
  // The row's read and writes into `out`; a read index outside the row's window is a finding
  // instead of a read.
  std::optional<ForwardReadFinding> add_row_ops(const RowForward& f, RowOps& out) const;
  void check_forward_kernels_of(StepRecord& rec, const Batch& batch);
  // A decode-only step of a CUDA-graph batch size in its graph's layout (runner_forward.cpp).
  GraphInputs graph_inputs(const model::ForwardMetadata& md, std::vector<RowOps>& rows);
  ForwardReadFinding describe_wrong_read(const StepRecord& rec, const Batch& batch,
                                         const ForwardRead& read, std::int32_t tensor) const;
  void execute_v1(StepRecord& rec, const Batch& batch);
  void postprocess_v1(StepRecord& rec, const Batch& batch, const std::vector<std::int32_t>& dst);
  // V1's input batch: its rows for this step, then (async) the counts of the step before read
  // from the buffer that step wrote them to by its rows; count_accepted writes that buffer.
  void condense_v1(const Batch& batch);
  void count_accepted(const Batch& batch);
  void execute_v2(StepRecord& rec, const Batch& batch);
  void execute_all(StepRecord& rec, const Batch& batch);
  model::RequestArrays slot_arrays() const;
  void store_slot_arrays(const model::RequestArrays& arrays);

  model::Layout layout_;
  RunnerOptions options_;
  std::unique_ptr<RunnerDecisions> decisions_; // at the mutation points (options_.mutant)
  std::unique_ptr<Executor> executor_;
  MetadataBuilder metadata_builder_; // its persistent CUDA-graph buffers live for the run
  model::LaunchCase launch_case_;    // reused: the layout is copied once
  std::vector<Request> slots_;
  std::vector<std::int32_t> free_slots_;
  std::unordered_map<std::string, std::int32_t> slot_index_;
  // Committed tokens per request (prompt, then accepted), kept across preemption: the truth
  // the forward stamps (FORWARD.md), not a decision.
  std::unordered_map<std::string, std::vector<std::int32_t>> truth_;
  std::unordered_map<std::string, std::int32_t> prompt_len_; // by request, from its arrival
  std::int32_t conv_width_max_ = 0;
  // The shapes of the CUDA graphs the executor has captured, by batch size: a step of that
  // size lays its inputs out as its graph reads them.
  std::map<std::int32_t, GraphShape> graph_shapes_;
  // V1: the persistent input batch's rows, and the accepted counts of the last step by the
  // rows it had then (the pinned host buffer async scheduling reads a step late).
  model::InputBatchRows input_batch_;
  model::InputBatchRows counted_batch_; // input_batch_ as the last step left it
  std::vector<std::int32_t> counts_by_row_;
  // Whether this run has probed the forward kernels' bound on the accepted count
  // (check_forward_kernels_of): once a run is enough to tell a bounded kernel.
  bool count_probed_ = false;
};

} // namespace mc::gpu::engine
