#include "gpu/cuda_backend.h"

#include "gpu/cuda_check.h"
#include "gpu/device_memory.h"
#include "gpu/kernel_launch.h"
#include "gpu/launch_plan.h"
#include "model/request_arrays.h"

#include <cstdlib>
#include <string_view>
#include <utility>

namespace mc::gpu {
namespace {

// The per-request arrays on the device: uploaded, pointed at, downloaded after the launch.
struct DeviceRequests {
  std::array<DeviceBuffer, model::kRequestArrays.size()> buffers;
  RequestPointers pointers;

  explicit DeviceRequests(const model::RequestArrays& arrays) {
    for (std::size_t i = 0; i < model::kRequestArrays.size(); ++i) {
      const std::vector<std::int32_t>& v = arrays.*model::kRequestArrays[i].member;
      if (v.empty()) continue;
      buffers[i] = upload_vector<std::int32_t>(v);
      pointers.*kRequestPointerFields[i] = buffers[i].as<std::int32_t>();
    }
  }
  void download(model::RequestArrays& arrays) const {
    for (std::size_t i = 0; i < model::kRequestArrays.size(); ++i) {
      std::vector<std::int32_t>& v = arrays.*model::kRequestArrays[i].member;
      if (!v.empty()) v = download_vector<std::int32_t>(buffers[i], v.size());
    }
  }
};

// MC_FUSED_START=ticket starts the fused kernel by tickets instead of a cooperative launch
// (scripts/gpu-check runs the GPU tests both ways, so the fallback stays tested).
FusedStart fused_start_from_env() {
  const char* v = std::getenv("MC_FUSED_START");
  if (v == nullptr || std::string_view(v) == "cooperative") return FusedStart::cooperative;
  if (std::string_view(v) == "ticket") return FusedStart::ticket;
  throw model::InputError(
      fmt::format("MC_FUSED_START must be 'cooperative' or 'ticket', got '{}'", v));
}

// Scratch of the fused launch in device memory (zeroed: ticket 0, no flag published).
struct DeviceScratch {
  DeviceBuffer row_decisions, row_blocks, active_rows, flags, ticket, records;

  FusedScratch bind(const FusedParams& p) {
    const std::int64_t reqs = p.num_reqs;
    row_decisions = DeviceBuffer(reqs * 4 * 4);
    row_blocks = DeviceBuffer(reqs * p.num_groups * std::int64_t{sizeof(GroupBlocks)});
    active_rows = DeviceBuffer(std::int64_t{p.num_segments} * kSegmentRows * 4);
    flags = DeviceBuffer(kSegmentsMax * 8);
    ticket = DeviceBuffer(4);
    records = DeviceBuffer(reqs * p.num_tensors * std::int64_t{sizeof(DecisionRecord)});
    return FusedScratch{.row_decisions = row_decisions.as<std::int32_t>(),
                        .row_blocks = row_blocks.as<GroupBlocks>(),
                        .active_rows = active_rows.as<std::int32_t>(),
                        .segment_flags = flags.as<std::uint64_t>(),
                        .ticket = ticket.as<std::uint32_t>(),
                        .records = records.as<DecisionRecord>()};
  }
};

void run_fused_cuda(const model::LaunchCase& launch, Mutant mutant, const DeviceArenas& arenas,
                    model::LaunchResult& result) {
  validate_fused_copies(launch);
  FusedParams p = make_fused_params(launch, arenas.tensors, arenas.units);
  p.tensors = arenas.device_tensors.as<TensorDesc>();
  p.units = arenas.device_units.as<UnitRef>();
  std::vector<DeviceBuffer> tables;
  for (const model::BlockTable& t : launch.block_tables.groups) {
    tables.push_back(upload_vector<std::int32_t>(t.block_ids));
    p.block_tables[tables.size() - 1] = tables.back().address();
  }
  const DeviceRequests requests(result.requests);
  p.requests = requests.pointers;
  DeviceScratch scratch;
  p.scratch = scratch.bind(p);
  p.epoch = 1;
  static const FusedStart start = fused_start_from_env(); // read once per process
  p.start = start;
  launch_fused(to_kernel_kind(launch.kind), true, mutant, p,
               fused_program_count(p, fused_programs_max()), nullptr);
  MC_CUDA_CHECK(cudaDeviceSynchronize());
  requests.download(result.requests);
  const auto records =
      download_vector<DecisionRecord>(scratch.records, static_cast<std::size_t>(p.num_reqs) *
                                                           static_cast<std::size_t>(p.num_tensors));
  result.decisions = compact_decisions(records, launch.layout);
}

void run_batch_copy_cuda(const model::LaunchCase& launch, Mutant mutant, const DeviceArenas& arenas,
                         model::LaunchResult& result) {
  BatchPlan plan = plan_batch_copy(launch, arenas.arena_addrs);
  if (plan.unsupported) {
    result.status = model::LaunchStatus::unsupported;
    result.unsupported_reason = std::move(plan.unsupported_reason);
    return;
  }
  const DeviceBuffer triples = upload_vector<CopyTriple>(plan.triples);
  const BatchCopyParams p{.triples = triples.as<CopyTriple>(),
                          .num_triples = static_cast<std::int64_t>(plan.triples.size()),
                          .num_units = plan.num_units};
  launch_batch_copy(mutant, p, nullptr);
  MC_CUDA_CHECK(cudaDeviceSynchronize());
  result.decisions = std::move(plan.decisions);
}

} // namespace

DeviceArenas::DeviceArenas(const model::Layout& layout, std::vector<std::uint64_t> addrs)
    : arena_addrs(std::move(addrs)), tensors(make_tensor_descs(layout, arena_addrs)),
      units(make_units(tensors)), device_tensors(upload_vector<TensorDesc>(tensors)),
      device_units(upload_vector<UnitRef>(units)) {}

bool cuda_available() {
  return device_present();
}

std::optional<int> cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

void use_cuda_device(int ordinal) {
  MC_CUDA_CHECK(cudaSetDevice(ordinal));
}

void check_cuda_environment() {
  (void)fused_start_from_env();
  (void)device_buffer_reuse();
}

bool cuda_context_usable() {
  // A sticky error is returned by every later call, synchronisation included; an error that
  // was not sticky (an allocation that failed) is not.
  return device_present() && cudaDeviceSynchronize() == cudaSuccess;
}

void run_launch_cuda_in_place(const model::LaunchCase& launch, Mutant mutant,
                              const DeviceArenas& arenas, model::LaunchResult& result) {
  if (runs_copy_plan(launch.kind)) {
    run_batch_copy_cuda(launch, mutant, arenas, result);
  } else {
    run_fused_cuda(launch, mutant, arenas, result);
  }
}

model::LaunchResult run_launch_cuda(const model::LaunchCase& launch, Mutant mutant) {
  if (!device_present()) throw model::EnvironmentError("no CUDA device is visible");
  validate_case(launch);
  model::LaunchResult result;
  result.requests = prepare_request_arrays(launch);
  on_device([&] {
    std::vector<DeviceBuffer> arenas;
    std::vector<std::uint64_t> addrs;
    for (const model::Arena& a : launch.arenas) {
      arenas.push_back(upload_arena(a));
      addrs.push_back(arenas.back().address());
    }
    const DeviceArenas in_place(launch.layout, std::move(addrs));
    run_launch_cuda_in_place(launch, mutant, in_place, result);
    if (result.status == model::LaunchStatus::unsupported) {
      for (const model::Arena& a : launch.arenas) // nothing ran: the arenas as they came
        result.arenas.push_back(a.clone());
    } else {
      for (const DeviceBuffer& a : arenas)
        result.arenas.push_back(download_arena(a));
    }
  });
  return result;
}

} // namespace mc::gpu
