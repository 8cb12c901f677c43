// The host executor: launches and the forward run the kernels' own per-program bodies on the
// CPU, in place over arenas that live for the run: launches one program after another in grid
// order, a large forward over the threads model/parallel.h allows.
// Launches go through the host backend's in-place run (gpu/host_backend.h) over these arenas.
#include "gpu/engine/executor.h"
#include "gpu/engine/forward.cuh"
#include "gpu/host_backend.h"
#include "gpu/launch_plan.h"
#include "model/block_copy.h"
#include "model/errors.h"
#include "model/parallel.h"

#include <algorithm>
#include <map>
#include <memory>

namespace mc::gpu::engine {
namespace {

std::vector<model::Arena> poisoned_arenas(const model::Layout& layout) {
  std::vector<model::Arena> arenas;
  for (const model::ArenaSpec& a : layout.arenas) {
    arenas.emplace_back(a.size_bytes());
    arenas.back().poison();
  }
  return arenas;
}

class HostExecutor final : public Executor {
public:
  HostExecutor(const model::Layout& layout, std::vector<model::Arena> arenas, Mutant kernel_mutant)
      : layout_(layout), kernel_mutant_(kernel_mutant), arenas_(std::move(arenas)),
        in_place_(layout_, arena_addresses(arenas_)) {
    MC_ASSERT(arenas_.size() == layout.arenas.size());
    forward_tensors_ = make_forward_tensors(layout_, in_place_.arena_addrs);
    for (const ForwardTensor& t : forward_tensors_)
      (t.is_temporal != 0 ? temporal_block_bytes_ : conv_block_bytes_) += t.natural_bytes;
  }

  model::LaunchResult launch(model::LaunchCase& lent) override {
    // validate_case checks the arenas against the layout: lend it ours for the call.
    lent.arenas = std::move(arenas_);
    model::LaunchResult result;
    try {
      validate_case(lent);
      result.requests = prepare_request_arrays(lent);
      run_launch_host_in_place(lent, kernel_mutant_, in_place_, result);
    } catch (...) {
      arenas_ = std::move(lent.arenas);
      throw;
    }
    arenas_ = std::move(lent.arenas);
    return result;
  }

  std::vector<std::uint64_t> forward(const model::BlockTables& tables,
                                     const std::vector<ForwardOp>& ops,
                                     const std::vector<ForwardRead>& reads,
                                     const std::vector<std::int32_t>& tokens) override {
    ForwardParams p = make_forward_params(layout_, tables, static_cast<std::int32_t>(ops.size()));
    p.tensors = forward_tensors_.data();
    p.ops = ops.data();
    p.tokens = tokens.data();
    p.reads = reads.data();
    p.num_reads = static_cast<std::int32_t>(reads.size());
    read_diffs_.assign(reads.size() * static_cast<std::size_t>(p.num_tensors), 0);
    p.read_diffs = read_diffs_.data();
    for (std::size_t g = 0; g < tables.groups.size(); ++g)
      p.block_tables[g] = reinterpret_cast<std::uint64_t>(tables.groups[g].block_ids.data());
    run_programs(p);
    return read_diffs_;
  }

  // A graph here is what a captured one is to the GPU: the kernels' parameters, input buffer
  // addresses included, fixed at the first step of a shape; a replay runs them as they are.
  std::vector<std::uint64_t> replay_graph(const GraphInputs& in, bool fresh_buffers) override {
    check_graph_inputs(in, static_cast<std::size_t>(layout_.num_groups()));
    auto [it, capture] = graphs_.try_emplace(in.shape.batch_size);
    HostGraph& g = it->second;
    if (!capture && !(g.buffers.front()->inputs.shape == in.shape)) {
      g = HostGraph{}; // a larger shape than captured: captured anew
      capture = true;
    }
    if (capture || fresh_buffers) {
      g.buffers.push_back(std::make_unique<GraphBuffers>(in, layout_.tensors.size()));
    } else {
      g.buffers.front()->copy_in_place(in);
    }
    if (capture) g.params = params_over(*g.buffers.back(), in.shape);
    std::fill(g.buffers.front()->read_diffs.begin(), g.buffers.front()->read_diffs.end(), 0);
    run_programs(g.params);
    return g.buffers.back()->read_diffs;
  }

  void copy_blocks(std::span<const model::BlockCopy> copies) override {
    model::copy_blocks(layout_, arenas_, copies);
  }

  const std::vector<model::Arena>& arenas() override { return arenas_; }

  std::vector<std::span<const std::byte>> read(std::span<const model::ArenaRange> ranges) override {
    std::vector<std::span<const std::byte>> out;
    out.reserve(ranges.size());
    for (const model::ArenaRange& r : ranges)
      out.push_back(arenas_[static_cast<std::size_t>(r.arena)].bytes().subspan(
          static_cast<std::size_t>(r.offset_bytes), static_cast<std::size_t>(r.size_bytes)));
    return out;
  }

private:
  // A graph's input buffers: allocated once, their addresses in its parameters.
  struct GraphBuffers {
    GraphBuffers(const GraphInputs& in, std::size_t num_tensors)
        : inputs(in), read_diffs(in.reads.size() * num_tensors, 0) {}
    void copy_in_place(const GraphInputs& in) {
      for (std::size_t g = 0; g < in.state_indices.size(); ++g)
        std::copy(in.state_indices[g].begin(), in.state_indices[g].end(),
                  inputs.state_indices[g].begin());
      std::copy(in.ops.begin(), in.ops.end(), inputs.ops.begin());
      std::copy(in.reads.begin(), in.reads.end(), inputs.reads.begin());
      std::copy(in.tokens.begin(), in.tokens.end(), inputs.tokens.begin());
    }
    GraphInputs inputs;
    std::vector<std::uint64_t> read_diffs;
  };
  struct HostGraph {
    std::vector<std::unique_ptr<GraphBuffers>> buffers; // front: the captured ones
    ForwardParams params;
  };

  ForwardParams params_over(GraphBuffers& b, const GraphShape& shape) const {
    ForwardParams p = make_graph_params(layout_, shape);
    p.tensors = forward_tensors_.data();
    p.ops = b.inputs.ops.data();
    p.tokens = b.inputs.tokens.data();
    p.reads = b.inputs.reads.data();
    p.read_diffs = b.read_diffs.data();
    for (std::size_t g = 0; g < b.inputs.state_indices.size(); ++g)
      p.block_tables[g] = reinterpret_cast<std::uint64_t>(b.inputs.state_indices[g].data());
    return p;
  }

  // Every read before any write: a row may read a column another of its writes replaces.
  // Read programs are independent. A write program goes to the thread of the block it writes,
  // so that the programs writing one block (a wrong table's conflict) run in program order and
  // the bytes never depend on the threads' timing.
  void run_programs(const ForwardParams& p) const {
    const std::int64_t reads_programs = std::int64_t{p.num_reads} * p.num_tensors;
    model::run_parts(p.num_reads * (conv_block_bytes_ + temporal_block_bytes_),
                     [&](std::int64_t part, std::int64_t parts) {
                       for (std::int64_t program = part; program < reads_programs; program += parts)
                         p.read_diffs[program] |= forward_read_diff(p, program, 0, 1);
                     });
    const std::int64_t programs = std::int64_t{p.num_ops} * p.num_tensors;
    std::int64_t write_bytes = 0;
    for (std::int32_t i = 0; i < p.num_ops; ++i)
      write_bytes += p.ops[i].is_temporal != 0 ? temporal_block_bytes_ : conv_block_bytes_;
    model::run_parts(write_bytes, [&](std::int64_t part, std::int64_t parts) {
      for (std::int64_t program = 0; program < programs; ++program)
        if (parts == 1 || write_part(p, program, parts) == part) forward_program(p, program, 0, 1);
    });
  }

  // The thread of the block a write program writes (any for one that writes nothing).
  static std::int64_t write_part(const ForwardParams& p, std::int64_t program, std::int64_t parts) {
    const ForwardOp& op = p.ops[program / p.num_tensors];
    const ForwardTensor& t = p.tensors[program % p.num_tensors];
    const unsigned char* block = forward_block(p, op.batch_row, op.col, t);
    return static_cast<std::int64_t>(model::mix64(reinterpret_cast<std::uintptr_t>(block)) %
                                     static_cast<std::uint64_t>(parts));
  }

  model::Layout layout_;
  Mutant kernel_mutant_ = Mutant::none;
  std::vector<model::Arena> arenas_; // moved in and out of launches; the bytes never move
  HostArenas in_place_;              // launches' view of arenas_
  std::vector<ForwardTensor> forward_tensors_;
  // A block's natural bytes summed over the conv tensors and over the temporal ones: what a
  // read or a write of one row costs, to decide whether a forward is worth the threads.
  std::int64_t conv_block_bytes_ = 0;
  std::int64_t temporal_block_bytes_ = 0;
  std::vector<std::uint64_t> read_diffs_;    // the last forward's
  std::map<std::int32_t, HostGraph> graphs_; // by batch size
};

} // namespace

std::unique_ptr<Executor> make_host_executor(const model::Layout& layout,
                                             std::vector<model::Arena> arenas,
                                             Mutant kernel_mutant) {
  return std::make_unique<HostExecutor>(layout, std::move(arenas), kernel_mutant);
}

std::unique_ptr<Executor> make_executor(model::Backend kind, const model::Layout& layout,
                                        Mutant kernel_mutant) {
  MC_ASSERT(kind == model::Backend::host || kind == model::Backend::cuda);
  return kind == model::Backend::host
             ? make_host_executor(layout, poisoned_arenas(layout), kernel_mutant)
             : make_cuda_executor(layout, kernel_mutant);
}

} // namespace mc::gpu::engine
