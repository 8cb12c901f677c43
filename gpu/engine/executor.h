// Where the GPU-side engine runs its kernels: the host executor (the kernels' bodies on the
// CPU in grid order, in place over host arenas) or the cuda executor (device arenas kept for
// the whole run; the step's small arrays go up, results come down). Both keep their arenas
// for the whole run: nothing is rebuilt per step.
#pragma once

#include "gpu/engine/forward_kernels.h"
#include "gpu/engine/forward_types.h"
#include "gpu/mutant.h"
#include "model/backend.h"
#include "model/expected_bytes.h"
#include "model/launch.h"
#include "model/step.h"

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace mc::gpu::engine {

// A decode-only step of a CUDA-graph batch size (model/FORWARD.md, "CUDA graphs"), laid out
// as the graph captured for its shape reads it: a fixed number of entries per metadata row,
// whatever the step needs of them. The graph's block tables are the step's state_indices
// (`width` entries per row, the pad -1 past a row's own), so an op's `col` and a read's columns
// are entries of its row's window and `batch_row` is the metadata row.
struct GraphShape {
  std::int32_t batch_size = 0;     // the capture size: decode rows, then padding rows
  std::int32_t width = 0;          // state_indices entries per row
  std::int32_t ops_per_row = 0;    // row i's ops at [i * ops_per_row, (i + 1) * ops_per_row)
  std::int32_t tokens_per_row = 0; // row i's tokens from i * tokens_per_row
  bool operator==(const GraphShape&) const = default;
};
struct GraphInputs {
  GraphShape shape;
  std::vector<std::vector<std::int32_t>> state_indices; // per group: batch_size * width
  std::vector<ForwardOp> ops;       // batch_size * ops_per_row; unused: batch_row -1
  std::vector<ForwardRead> reads;   // batch_size, row i's at i; unused: batch_row -1
  std::vector<std::int32_t> tokens; // batch_size * tokens_per_row
};

class Executor {
public:
  virtual ~Executor() = default;
  // Runs one launch over the executor's arenas (`launch_case.arenas` comes in and leaves
  // empty; the host executor lends its arenas to it for the call). The
  // result holds status, arrays and decisions; its arenas stay empty. Throws
  // model::InputError for an invalid case, as the backends do.
  virtual model::LaunchResult launch(model::LaunchCase& launch_case) = 0;
  // Runs the read programs of `reads`, then the forward programs of `ops`, over the batch
  // tables `tables` (forward.cuh). Returns, per (read, tensor), the bits in which the block
  // read differed from the expected state (0: it agreed).
  virtual std::vector<std::uint64_t> forward(const model::BlockTables& tables,
                                             const std::vector<ForwardOp>& ops,
                                             const std::vector<ForwardRead>& reads,
                                             const std::vector<std::int32_t>& tokens) = 0;
  // Runs `in` as vLLM runs a decode-only batch: the graph of its shape, captured at the first
  // step of that shape over input buffers the executor keeps for the run, replayed with the
  // step's inputs copied into those buffers in place, and the null block skipped (the padding
  // rows). With `fresh_buffers` the inputs go into newly allocated buffers instead, which the
  // graph never reads: the bug of a builder that reallocates its persistent tensors (a runner
  // mutant). Returns the per-(read, tensor) differences as forward(), from the buffers the
  // step's inputs went to.
  virtual std::vector<std::uint64_t> replay_graph(const GraphInputs& in, bool fresh_buffers) = 0;
  // The forward's state kernels of the module under test, where this executor has them (an
  // external worker that greeted with forward=): "ssm", "conv". Empty: the forward is this
  // program's own alone.
  virtual std::vector<std::string> forward_kernels() const { return {}; }
  // Runs those kernels on the decode rows of a step (forward_kernels.h) and reports what they
  // wrote. Throws KernelFailure where they raised or the worker died.
  virtual ForwardKernelReport run_forward_kernels(const ForwardKernelStep& step) {
    (void)step;
    return {};
  }
  // The step's block copies (model::Step::block_copies, partial-hash hits) over the executor's
  // arenas, before the step's launches: every state tensor of the copy's group, whole blocks.
  virtual void copy_blocks(std::span<const model::BlockCopy> copies) = 0;
  // The arenas as they are now, in host memory (the cuda executor downloads them).
  virtual const std::vector<model::Arena>& arenas() = 0;
  // The bytes of `ranges` as they are now, in host memory, one span per range in order (the
  // cuda executor downloads only these). Valid until the next read() or arenas().
  virtual std::vector<std::span<const std::byte>>
  read(std::span<const model::ArenaRange> ranges) = 0;
  // Compares its bytes with `expected` and returns per range the first byte that differs, -1
  // where every byte holds. Here the bytes are read() and the expected ones made on the host;
  // the cuda executor makes them on the device and reads back only the answers.
  virtual std::vector<std::int64_t> compare(const model::ExpectedStates& expected) {
    std::vector<model::ArenaRange> ranges;
    ranges.reserve(expected.ranges.size());
    for (const model::ExpectedRange& r : expected.ranges)
      ranges.push_back(r.range);
    const std::vector<std::span<const std::byte>> bytes = read(ranges);
    return model::first_differences(expected, bytes);
  }
  // Whether compare() runs where the bytes are, so that no state's bytes cross to the host: the
  // lockstep loop then compares through it.
  virtual bool compares_where_bytes_are() const { return false; }
  // false: launches report effects only (status, arrays, arena bytes), no copy decisions.
  virtual bool records_decisions() const { return true; }
};

// A launch the kernels under test could not complete, from an executor whose kernels run in
// another process: they raised or wrote outside their buffers (kind "kernel-error"), the
// process died ("crash") or ran past its time ("timeout"). Always a finding at the step it
// reached, whoever runs the step: never an abort.
struct KernelFailure : std::runtime_error {
  KernelFailure(std::string failure_kind, const std::string& message)
      : std::runtime_error(message), kind(std::move(failure_kind)) {}
  std::string kind;
};

// Where the executors of runs whose kernels live outside this program come from (an external
// worker: backends/external_engine.h). It outlives the runs it makes executors for.
class ExecutorSource {
public:
  virtual ~ExecutorSource() = default;
  // An executor over poisoned arenas of `layout`, as make_executor's.
  virtual std::unique_ptr<Executor> make(const model::Layout& layout) = 0;
  // The launch kinds its kernels cover: a runner that launches another cannot run on it.
  virtual const std::vector<model::LaunchKind>& kinds() const = 0;
};

// Poisoned arenas of `layout`, as the oracle runner starts; every launch runs the kernels of
// `kernel_mutant` (gpu/mutant.h; none: the clean kernels). Throws model::EnvironmentError
// for cuda when the build or the machine has no CUDA.
std::unique_ptr<Executor> make_executor(model::Backend kind, const model::Layout& layout,
                                        Mutant kernel_mutant = Mutant::none);

// A host executor over `arenas` (one per layout arena, as the caller prepared them: an external
// worker's shared ones).
std::unique_ptr<Executor> make_host_executor(const model::Layout& layout,
                                             std::vector<model::Arena> arenas,
                                             Mutant kernel_mutant = Mutant::none);
std::unique_ptr<Executor> make_cuda_executor(const model::Layout& layout,
                                             Mutant kernel_mutant = Mutant::none);

// Descriptors of every state tensor for the forward, from arena base addresses.
std::vector<ForwardTensor> make_forward_tensors(const model::Layout& layout,
                                                const std::vector<std::uint64_t>& arena_addrs);
// The layout-level fields of ForwardParams for `tables` (addresses of arrays left null).
ForwardParams make_forward_params(const model::Layout& layout, const model::BlockTables& tables,
                                  std::int32_t num_ops);
// The same for a graph of `shape` (tables: the state_indices, null block skipped).
ForwardParams make_graph_params(const model::Layout& layout, const GraphShape& shape);
// Checks that `in` has the sizes its shape gives (a program error otherwise).
void check_graph_inputs(const GraphInputs& in, std::size_t num_groups);

} // namespace mc::gpu::engine
