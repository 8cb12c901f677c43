#include "gpu/host_backend.h"

#include "gpu/guarded_tables.h"
#include "gpu/kernels/batch_copy.cuh"
#include "gpu/kernels/fused_launch.cuh"
#include "gpu/kernels/mutant_policies.cuh"
#include "gpu/launch_plan.h"
#include "model/address_ranges.h"
#include "model/request_arrays.h"

#include <fmt/format.h>

#include <vector>

namespace mc::gpu {
namespace {

// Copy programs the host runs: few, since one host "team" is one thread anyway.
constexpr std::int64_t kHostProgramsMax = 8;

template <KernelKind K, class Policy>
void run_fused_programs(const FusedParams& p, int num_programs) {
  FusedShared shared{};
  for (int program = 0; program < num_programs; ++program)
    fused_program<K, true, Policy>(p, program, num_programs, HostTeam{}, shared);
}

template <class Policy> void run_fused(KernelKind kind, const FusedParams& p, int num_programs) {
  switch (kind) {
  case KernelKind::postprocess:
    return run_fused_programs<KernelKind::postprocess, Policy>(p, num_programs);
  case KernelKind::postprocess_align:
    return run_fused_programs<KernelKind::postprocess_align, Policy>(p, num_programs);
  case KernelKind::precopy:
    return run_fused_programs<KernelKind::precopy, Policy>(p, num_programs);
  case KernelKind::preprocess_align:
    return run_fused_programs<KernelKind::preprocess_align, Policy>(p, p.num_segments);
  }
}

// Scratch of the fused launch in host memory.
struct HostScratch {
  std::vector<std::int32_t> row_decisions;
  std::vector<GroupBlocks> row_blocks;
  std::vector<std::int32_t> active_rows;
  std::vector<std::uint64_t> segment_flags = std::vector<std::uint64_t>(kSegmentsMax, 0);
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
                        .segment_flags = segment_flags.data(),
                        .ticket = &ticket,
                        .records = records.data()};
  }
};

void run_fused_launch(const model::LaunchCase& launch, Mutant mutant, const HostArenas& arenas,
                      const GuardedTables& tables, model::LaunchResult& result) {
  validate_fused_copies(launch);
  FusedParams p = make_fused_params(launch, arenas.tensors, arenas.units);
  for (std::size_t g = 0; g < tables.size(); ++g)
    p.block_tables[g] = tables.address(g);
  p.requests = host_request_pointers(result.requests);
  HostScratch scratch;
  p.scratch = scratch.bind(p);
  p.epoch = 1;
  const int programs = fused_program_count(p, kHostProgramsMax);
  visit_kernel_policy(mutant, [&](auto policy) {
    run_fused<typename decltype(policy)::type>(to_kernel_kind(launch.kind), p, programs);
  });
  result.decisions = compact_decisions(scratch.records, launch.layout);
}

void run_batch_copy(const model::LaunchCase& launch, Mutant mutant, const HostArenas& arenas,
                    model::LaunchResult& result) {
  BatchPlan plan = plan_batch_copy(launch, arenas.arena_addrs);
  if (plan.unsupported) {
    result.status = model::LaunchStatus::unsupported;
    result.unsupported_reason = std::move(plan.unsupported_reason);
    return;
  }
  const BatchCopyParams p{.triples = plan.triples.data(),
                          .num_triples = static_cast<std::int64_t>(plan.triples.size()),
                          .num_units = plan.num_units};
  const std::int64_t programs = std::min(kHostProgramsMax, p.num_units);
  visit_kernel_policy(mutant, [&](auto policy) {
    for (std::int64_t program = 0; program < programs; ++program)
      batch_copy_program<typename decltype(policy)::type>(p, program, programs, HostTeam{});
  });
  result.decisions = std::move(plan.decisions);
}

// "arena 2 (conv of group 0 layer 1)", or "(group 0 layer 1)" for a page the states of a layer
// share: the name a crash line gives the arena.
std::string arena_name(const model::Layout& layout, std::size_t arena) {
  const model::StateTensor* first = nullptr;
  int tensors = 0;
  for (const model::StateTensor& t : layout.tensors) {
    if (t.arena != static_cast<std::int32_t>(arena)) continue;
    if (first == nullptr) first = &t;
    ++tensors;
  }
  if (first == nullptr) return fmt::format("arena {}", arena);
  const std::string_view kind = first->kind() == model::StateKind::conv ? "conv" : "temporal";
  if (tensors == 1)
    return fmt::format("arena {} ({} of group {} layer {})", arena, kind, first->group,
                       first->layer);
  return fmt::format("arena {} (group {} layer {})", arena, first->group, first->layer);
}

// Names the buffers the kernels may touch (model/address_ranges.h), so that a kernel reading
// or writing out of bounds in an isolated run (fuzz/isolate.h) is reported against the buffer
// it missed.
void register_case_buffers(model::AddressRangeScope& scope, const model::LaunchCase& launch,
                           const HostArenas& arenas, const GuardedTables& tables,
                           const model::RequestArrays& requests) {
  for (std::size_t i = 0; i < arenas.arena_addrs.size() && i < launch.layout.arenas.size(); ++i)
    scope.add(reinterpret_cast<const void*>(arenas.arena_addrs[i]),
              static_cast<std::size_t>(launch.layout.arenas[i].size_bytes()),
              arena_name(launch.layout, i));
  for (std::size_t g = 0; g < launch.block_tables.groups.size(); ++g) {
    // The fused kernels read the guarded copies; batch_copy's plan reads the case's own.
    const std::span<const std::int32_t> ids =
        g < tables.size() ? tables.group(g) : launch.block_tables.groups[g].block_ids;
    scope.add(ids.data(), ids.size_bytes(), fmt::format("block table of group {}", g));
  }
  for (const model::RequestArrayField& field : model::kRequestArrays) {
    const std::vector<std::int32_t>& values = requests.*field.member;
    scope.add(values.data(), values.size() * sizeof(std::int32_t), field.name);
  }
}

} // namespace

HostArenas::HostArenas(const model::Layout& layout, std::vector<std::uint64_t> addrs)
    : arena_addrs(std::move(addrs)), tensors(make_tensor_descs(layout, arena_addrs)),
      units(make_units(tensors)) {}

std::vector<std::uint64_t> arena_addresses(const std::vector<model::Arena>& arenas) {
  std::vector<std::uint64_t> out;
  for (const model::Arena& a : arenas)
    out.push_back(a.address());
  return out;
}

void run_launch_host_in_place(const model::LaunchCase& launch, Mutant mutant,
                              const HostArenas& arenas, model::LaunchResult& result) {
  // batch_copy plans its copies from the case's tables on the host: only the fused kernels
  // read tables, through the guarded copies.
  const bool copy_plan = runs_copy_plan(launch.kind);
  const GuardedTables tables(copy_plan ? model::BlockTables{} : launch.block_tables);
  model::AddressRangeScope buffers;
  register_case_buffers(buffers, launch, arenas, tables, result.requests);
  if (copy_plan) {
    run_batch_copy(launch, mutant, arenas, result);
  } else {
    run_fused_launch(launch, mutant, arenas, tables, result);
  }
}

model::LaunchResult run_launch_host(const model::LaunchCase& launch, Mutant mutant) {
  validate_case(launch);
  model::LaunchResult result;
  result.requests = prepare_request_arrays(launch);
  for (const model::Arena& a : launch.arenas)
    result.arenas.push_back(a.clone());
  run_launch_host_in_place(launch, mutant,
                           HostArenas(launch.layout, arena_addresses(result.arenas)), result);
  return result;
}

} // namespace mc::gpu
