// The host executor: launches and the forward run the kernels' own per-program bodies on the
// CPU, one program after another in grid order, in place over arenas that live for the run.
// The launch path mirrors gpu/host_backend.cpp without its per-launch clone of the arenas.
#include "gpu/engine/executor.h"
#include "gpu/engine/forward.cuh"
#include "gpu/kernels/batch_copy.cuh"
#include "gpu/kernels/fused_launch.cuh"
#include "gpu/launch_plan.h"
#include "model/errors.h"

namespace mc::gpu::engine {
namespace {

constexpr std::int64_t kHostProgramsMax = 8;

std::vector<std::uint64_t> arena_addresses(const std::vector<model::Arena>& arenas) {
  std::vector<std::uint64_t> out;
  for (const model::Arena& a : arenas)
    out.push_back(a.address());
  return out;
}

template <KernelKind K> void run_programs(const FusedParams& p, int num_programs) {
  FusedShared shared{};
  for (int program = 0; program < num_programs; ++program)
    fused_program<K, true, Mutant::none>(p, program, num_programs, HostTeam{}, shared);
}

void run_fused(KernelKind kind, const FusedParams& p) {
  const int programs = fused_program_count(p, kHostProgramsMax);
  switch (kind) {
  case KernelKind::postprocess:
    return run_programs<KernelKind::postprocess>(p, programs);
  case KernelKind::postprocess_align:
    return run_programs<KernelKind::postprocess_align>(p, programs);
  case KernelKind::precopy:
    return run_programs<KernelKind::precopy>(p, programs);
  case KernelKind::preprocess_align:
    return run_programs<KernelKind::preprocess_align>(p, p.num_segments);
  }
}

// Scratch of one fused launch in host memory.
struct Scratch {
  std::vector<std::int32_t> row_decisions, active_rows;
  std::vector<GroupBlocks> row_blocks;
  std::vector<std::int32_t> counts = std::vector<std::int32_t>(kSegmentsMax, 0);
  std::vector<std::uint32_t> flags = std::vector<std::uint32_t>(kSegmentsMax, 0);
  std::uint32_t ticket = 0;
  std::vector<DecisionRecord> records;

  FusedScratch bind(const FusedParams& p) {
    const auto reqs = static_cast<std::size_t>(p.num_reqs);
    row_decisions.assign(reqs * 4, 0);
    row_blocks.assign(reqs * static_cast<std::size_t>(p.num_groups), GroupBlocks{});
    active_rows.assign(static_cast<std::size_t>(p.num_segments) * kSegmentRows, -1);
    records.assign(reqs * static_cast<std::size_t>(p.num_tensors), DecisionRecord{});
    return FusedScratch{.row_decisions = row_decisions.data(),
                        .row_blocks = row_blocks.data(),
                        .active_rows = active_rows.data(),
                        .segment_counts = counts.data(),
                        .segment_flags = flags.data(),
                        .ticket = &ticket,
                        .records = records.data()};
  }
};

class HostExecutor final : public Executor {
public:
  explicit HostExecutor(const model::Layout& layout) : layout_(layout) {
    for (const model::ArenaSpec& a : layout.arenas) {
      arenas_.emplace_back(a.size_bytes());
      arenas_.back().poison();
    }
    tensors_ = make_tensor_descs(layout_, arena_addresses(arenas_));
    units_ = make_units(tensors_);
    forward_tensors_ = make_forward_tensors(layout_, arena_addresses(arenas_));
  }

  model::LaunchResult launch(model::LaunchCase& lent) override {
    // validate_case checks the arenas against the layout: lend it ours for the call.
    lent.arenas = std::move(arenas_);
    model::LaunchResult result;
    try {
      validate_case(lent);
      result.requests = prepare_request_arrays(lent);
      if (lent.kind == model::LaunchKind::batch_copy) {
        run_batch(lent, result);
      } else {
        run_fused_in_place(lent, result);
      }
    } catch (...) {
      arenas_ = std::move(lent.arenas);
      throw;
    }
    arenas_ = std::move(lent.arenas);
    return result;
  }

  void forward(const model::BlockTables& tables, const std::vector<ForwardOp>& ops,
               const std::vector<std::int32_t>& tokens) override {
    ForwardParams p = make_forward_params(layout_, tables, static_cast<std::int32_t>(ops.size()));
    p.tensors = forward_tensors_.data();
    p.ops = ops.data();
    p.tokens = tokens.data();
    for (std::size_t g = 0; g < tables.groups.size(); ++g)
      p.block_tables[g] = reinterpret_cast<std::uint64_t>(tables.groups[g].block_ids.data());
    const std::int64_t programs = std::int64_t{p.num_ops} * p.num_tensors;
    for (std::int64_t program = 0; program < programs; ++program)
      forward_program(p, program, 0, 1);
  }

  const std::vector<model::Arena>& arenas() override { return arenas_; }

private:
  void run_fused_in_place(const model::LaunchCase& lc, model::LaunchResult& result) {
    validate_fused_copies(lc);
    FusedParams p = make_fused_params(lc, tensors_, units_);
    for (std::size_t g = 0; g < lc.block_tables.groups.size(); ++g)
      p.block_tables[g] =
          reinterpret_cast<std::uint64_t>(lc.block_tables.groups[g].block_ids.data());
    p.requests = host_request_pointers(result.requests);
    Scratch scratch;
    p.scratch = scratch.bind(p);
    p.epoch = 1;
    run_fused(to_kernel_kind(lc.kind), p);
    result.decisions = compact_decisions(scratch.records, lc.layout);
  }

  void run_batch(const model::LaunchCase& lc, model::LaunchResult& result) {
    BatchPlan plan = plan_batch_copy(lc, arena_addresses(lc.arenas));
    if (plan.unsupported) {
      result.status = model::LaunchStatus::unsupported;
      result.unsupported_reason = std::move(plan.unsupported_reason);
      return;
    }
    const BatchCopyParams p{.triples = plan.triples.data(),
                            .num_triples = static_cast<std::int64_t>(plan.triples.size()),
                            .num_units = plan.num_units};
    const std::int64_t programs = std::min(kHostProgramsMax, p.num_units);
    for (std::int64_t program = 0; program < programs; ++program)
      batch_copy_program<Mutant::none>(p, program, programs, HostTeam{});
    result.decisions = std::move(plan.decisions);
  }

  model::Layout layout_;
  std::vector<model::Arena> arenas_;
  std::vector<TensorDesc> tensors_;
  std::vector<UnitRef> units_;
  std::vector<ForwardTensor> forward_tensors_;
};

} // namespace

std::unique_ptr<Executor> make_host_executor(const model::Layout& layout) {
  return std::make_unique<HostExecutor>(layout);
}

std::unique_ptr<Executor> make_executor(ExecutorKind kind, const model::Layout& layout) {
  return kind == ExecutorKind::host ? make_host_executor(layout) : make_cuda_executor(layout);
}

} // namespace mc::gpu::engine
