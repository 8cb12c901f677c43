#include "bench/kernel_bench_device.h"

#include "gpu/cuda_check.h"
#include "gpu/kernel_launch.h"
#include "gpu/launch_plan.h"

#include <algorithm>
#include <atomic>

namespace mc::gpu {

namespace {

constexpr std::uint64_t kLatchTimeoutNs = 1'000'000'000;

// Two int32 in mapped pinned host memory: [0] released by the host, [1] set by a latch that
// timed out.
class LatchFlags {
public:
  LatchFlags() {
    MC_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), 2 * sizeof(std::int32_t),
                                cudaHostAllocMapped));
    host_[0] = 0;
    host_[1] = 0;
    MC_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~LatchFlags() { cudaFreeHost(host_); }
  LatchFlags(const LatchFlags&) = delete;
  LatchFlags& operator=(const LatchFlags&) = delete;

  void hold(cudaStream_t stream) {
    set_release(0);
    launch_latch(device_, device_ + 1, kLatchTimeoutNs, stream);
  }
  void release() { set_release(1); }
  bool timed_out() const { return std::atomic_ref<std::int32_t>(host_[1]).load() != 0; }

private:
  void set_release(std::int32_t v) { std::atomic_ref<std::int32_t>(host_[0]).store(v); }
  std::int32_t* host_ = nullptr;
  std::int32_t* device_ = nullptr;
};

} // namespace

double median_us(cudaStream_t stream, int iters, int batch, Timing timing,
                 const std::function<void(int)>& run) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  MC_CUDA_CHECK(cudaEventCreate(&start));
  MC_CUDA_CHECK(cudaEventCreate(&stop));
  LatchFlags latch;
  for (int i = 0; i < 3; ++i)
    run(i); // warm-up
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    if (timing == Timing::queued) latch.hold(stream);
    MC_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int j = 0; j < batch; ++j)
      run(i * batch + j);
    MC_CUDA_CHECK(cudaEventRecord(stop, stream));
    if (timing == Timing::queued) latch.release();
    MC_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    MC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(static_cast<double>(ms) * 1000.0 / batch);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (latch.timed_out())
    throw model::EnvironmentError("bench: a timing latch gave up after 1 s: the host could not "
                                  "queue one measured run in time (is the machine overloaded?)");
  std::sort(times.begin(), times.end());
  return times.empty() ? 0.0 : times[times.size() / 2];
}

BenchDevice::BenchDevice(const BenchCase& bench, FusedStart start) : bench_(bench) {
  MC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  std::vector<std::uint64_t> bases;
  for (const model::ArenaSpec& a : bench.layout.arenas) {
    arenas_.emplace_back(a.size_bytes());
    bases.push_back(arenas_.back().address());
  }
  tensors_ = make_tensor_descs(bench.layout, bases);
  units_ = make_units(tensors_);
  d_tensors_ = upload_vector<TensorDesc>(tensors_);
  d_units_ = upload_vector<UnitRef>(units_);
  for (const model::BlockTables& set : bench.sets) {
    tables_.emplace_back();
    for (const model::BlockTable& t : set.groups)
      tables_.back().push_back(upload_vector<std::int32_t>(t.block_ids));
  }
  const model::RequestArrays& r = bench.requests;
  for (const auto* v : {&r.idx_mapping, &r.num_accepted, &r.state_idx, &r.new_num_computed})
    requests_.push_back(upload_vector<std::int32_t>(*v));
  model::LaunchCase shape;
  shape.layout = bench.layout;
  shape.kind = model::LaunchKind::postprocess_align;
  shape.num_reqs = shape.num_slots = bench.num_reqs;
  shape.block_tables = bench.sets.front();
  params_ = make_fused_params(shape, tensors_, units_);
  params_.start = start;
  params_.tensors = d_tensors_.as<TensorDesc>();
  params_.units = d_units_.as<UnitRef>();
  params_.requests = RequestPointers{.idx_mapping = requests_[0].as<std::int32_t>(),
                                     .num_accepted = requests_[1].as<std::int32_t>(),
                                     .state_idx = requests_[2].as<std::int32_t>(),
                                     .new_num_computed = requests_[3].as<std::int32_t>()};
  const std::int64_t reqs = bench.num_reqs;
  for (const std::int64_t bytes :
       {reqs * 16, reqs * params_.num_groups * std::int64_t{sizeof(GroupBlocks)},
        std::int64_t{params_.num_segments} * kSegmentRows * 4, std::int64_t{kSegmentsMax} * 8,
        std::int64_t{4}})
    scratch_.emplace_back(std::max<std::int64_t>(bytes, 4));
  params_.scratch = FusedScratch{.row_decisions = scratch_[0].as<std::int32_t>(),
                                 .row_blocks = scratch_[1].as<GroupBlocks>(),
                                 .active_rows = scratch_[2].as<std::int32_t>(),
                                 .segment_flags = scratch_[3].as<std::uint64_t>(),
                                 .ticket = scratch_[4].as<std::uint32_t>()};
  programs_ = fused_program_count(params_, fused_programs_max());
  for (std::size_t s = 0; s < bench.sets.size(); ++s) {
    const BatchPlan plan = plan_batch_copy(batch_copy_view(bench, s), bases);
    MC_ASSERT(!plan.unsupported);
    triples_.push_back(plan.triples);
    d_triples_.push_back(upload_vector<CopyTriple>(plan.triples));
    triple_units_.push_back(plan.num_units);
  }
  bytes_per_launch_ = 0;
  for (const CopyTriple& t : triples_.front())
    bytes_per_launch_ += t.bytes;
}

BenchDevice::~BenchDevice() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void BenchDevice::launch_fused(int run) {
  launch_fused_grid(run, programs_);
}

void BenchDevice::launch_fused_deciders_only(int run) {
  launch_fused_grid(run, params_.num_segments);
}

void BenchDevice::launch_fused_grid(int run, int programs) {
  const std::vector<DeviceBuffer>& tables = tables_[set_of(run)];
  for (std::size_t g = 0; g < tables.size(); ++g)
    params_.block_tables[g] = tables[g].address();
  params_.epoch = params_.epoch == 0xFFFFFFFFu ? 1u : params_.epoch + 1; // never 0
  gpu::launch_fused(KernelKind::postprocess_align, false, Mutant::none, params_, programs, stream_);
}

const DeviceBuffer& BenchDevice::largest_arena() const {
  return *std::max_element(
      arenas_.begin(), arenas_.end(),
      [](const DeviceBuffer& a, const DeviceBuffer& b) { return a.size_bytes() < b.size_bytes(); });
}

void BenchDevice::launch_empty_grid() {
  gpu::launch_empty(programs_, stream_);
}

void BenchDevice::launch_batch_kernel(int run) {
  const std::size_t set = set_of(run);
  const BatchCopyParams p{.triples = d_triples_[set].as<CopyTriple>(),
                          .num_triples = static_cast<std::int64_t>(triples_[set].size()),
                          .num_units = triple_units_[set]};
  launch_batch_copy(Mutant::none, p, stream_);
}

} // namespace mc::gpu
