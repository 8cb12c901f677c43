// `mambacheck bench` (bench/kernel_bench.h): every number comes from this run on this GPU.
#include "bench/kernel_bench.h"

#include "bench/kernel_bench_cases.h"
#include "bench/kernel_bench_device.h"
#include "gpu/cuda_check.h"
#include "gpu/device_memory.h"
#include "model/errors.h"
#include "model/output_file.h"
#include "model/presets.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <ostream>

namespace mc::gpu {
namespace {

const std::vector<std::string> kDefaultPresets = {"mamba2-2.7b", "qwen3-next-80b", "nemotron-h-8b"};
constexpr std::int64_t kMemcpyScratchMax = std::int64_t{1} << 30;

double gbps(std::int64_t bytes, double us) {
  return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0;
}

// cudaMemcpyAsync D2D of `bytes` (timed on at most 1 GiB, scaled to `bytes`), between two
// halves of the case's largest arena when it holds both: the same memory as the kernels use,
// so where the allocator placed it (on an H100 the same copy differed by up to 17% between
// allocations) weighs on both sides of the ratio alike. Else between two fresh buffers.
double memcpy_us(const BenchDevice& dev, std::int64_t bytes, int iters) {
  constexpr std::int64_t kAlign = std::int64_t{2} << 20;
  const std::int64_t n = std::min(bytes, kMemcpyScratchMax);
  if (n <= 0) return 0;
  const DeviceBuffer& arena = dev.largest_arena();
  const std::int64_t half = (n + kAlign - 1) / kAlign * kAlign;
  const bool in_arena = arena.size_bytes() >= half + n;
  const DeviceBuffer a(in_arena ? 0 : n);
  const DeviceBuffer b(in_arena ? 0 : n);
  const auto* src = static_cast<const std::byte*>(in_arena ? arena.data() : a.data());
  auto* dst = static_cast<std::byte*>(in_arena ? arena.data() : b.data()) + (in_arena ? half : 0);
  const double us = median_us(dev.stream(), iters, 1, Timing::queued, [&](int) {
    MC_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice,
                                  dev.stream()));
  });
  return us * static_cast<double>(bytes) / static_cast<double>(n);
}

// cudaMemcpyBatchAsync over the same copy list (CUDA 12.8+); -1 when unavailable.
double batch_memcpy_us(BenchDevice& dev, std::size_t sets, int iters) {
#if CUDART_VERSION >= 12080
  std::vector<std::vector<void*>> dsts(sets);
  std::vector<std::vector<const void*>> srcs(sets);
  std::vector<std::vector<std::size_t>> sizes(sets);
  for (std::size_t s = 0; s < sets; ++s)
    for (const CopyTriple& t : dev.triples(s)) {
      dsts[s].push_back(reinterpret_cast<void*>(t.dst_addr));
      srcs[s].push_back(reinterpret_cast<const void*>(t.src_addr));
      sizes[s].push_back(static_cast<std::size_t>(t.bytes));
    }
  if (sizes.front().empty()) return 0;
  cudaMemcpyAttributes attrs{};
  attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t attr_index = 0;
  // Timed alone: cudaMemcpyBatchAsync waits on the host while its stream is busy, so it
  // cannot be queued behind the latch (and its host work is part of its cost).
  return median_us(dev.stream(), iters, 1, Timing::alone, [&](int i) {
    const std::size_t s = static_cast<std::size_t>(i) % sets;
#if CUDART_VERSION >= 13000
    MC_CUDA_CHECK(cudaMemcpyBatchAsync(dsts[s].data(), srcs[s].data(), sizes[s].data(),
                                       sizes[s].size(), &attrs, &attr_index, 1, dev.stream()));
#else
    std::size_t fail_index = 0;
    MC_CUDA_CHECK(cudaMemcpyBatchAsync(dsts[s].data(), const_cast<void**>(srcs[s].data()),
                                       sizes[s].data(), sizes[s].size(), &attrs, &attr_index, 1,
                                       &fail_index, dev.stream()));
#endif
  });
#else
  (void)dev;
  (void)sets;
  (void)iters;
  return -1;
#endif
}

FusedStart fused_start(const BenchOptions& options) {
  return options.ticket_start ? FusedStart::ticket : FusedStart::cooperative;
}

nlohmann::json measure(const BenchCase& bench, const BenchOptions& options, std::ostream& out) {
  const int iters = options.iters;
  BenchDevice dev(bench, fused_start(options));
  const std::size_t sets = bench.sets.size();
  const double fused =
      median_us(dev.stream(), iters, 1, Timing::queued, [&](int i) { dev.launch_fused(i); });
  const std::int64_t bytes = dev.bytes_per_launch();
  const double memcpy = memcpy_us(dev, bytes, iters);
  const double batch = batch_memcpy_us(dev, sets, iters);
  const double kernel =
      median_us(dev.stream(), iters, 1, Timing::queued, [&](int i) { dev.launch_batch_kernel(i); });
  out << fmt::format(
      "{:<22} reqs {:>4} crossing {:>4} states {:>4} sets {}  {:>9.3f} MB  fused {:>9.1f} us "
      "{:>7.1f} GB/s | memcpy {:>9.1f} us (x{:.2f}) | batch memcpy {:>9.1f} us (x{:.2f}) | "
      "batch kernel {:>9.1f} us\n",
      bench.name, bench.num_reqs, bench.num_copying, dev.num_tensors(), sets,
      static_cast<double>(bytes) / 1e6, fused, gbps(bytes, fused), memcpy,
      fused > 0 ? memcpy / fused : 0, batch, fused > 0 && batch > 0 ? batch / fused : 0, kernel);
  return {{"case", bench.name},
          {"requests", bench.num_reqs},
          {"crossing", bench.num_copying},
          {"states", dev.num_tensors()},
          {"input_sets", sets},
          {"bytes_per_launch", bytes},
          {"fused_us", fused},
          {"fused_gbps", gbps(bytes, fused)},
          {"memcpy_us", memcpy},
          {"memcpy_gbps", gbps(bytes, memcpy)},
          {"batch_memcpy_us", batch},
          {"batch_kernel_us", kernel},
          {"memcpy_over_fused", fused > 0 ? memcpy / fused : 0}};
}

// The decision-only launch in detail: GPU time (queued behind a latch) one launch at a time
// and back to back, the time seen by a caller that launches it alone on an idle stream, and
// the floors: the deciders alone and an empty kernel of the same grid.
nlohmann::json measure_decision_only(const BenchCase& bench, const BenchOptions& options,
                                     std::ostream& out) {
  const int iters = options.iters;
  BenchDevice dev(bench, fused_start(options));
  constexpr int kBatch = 20;
  const auto fused = [&](int i) { dev.launch_fused(i); };
  const auto deciders = [&](int i) { dev.launch_fused_deciders_only(i); };
  const auto empty = [&](int) { dev.launch_empty_grid(); };
  const auto time = [&](int batch, Timing timing, const std::function<void(int)>& run) {
    return median_us(dev.stream(), iters, batch, timing, run);
  };
  const nlohmann::json r = {{"grid", dev.programs()},
                            {"fused_us", time(1, Timing::queued, fused)},
                            {"fused_back_to_back_us", time(kBatch, Timing::queued, fused)},
                            {"fused_alone_us", time(1, Timing::alone, fused)},
                            {"deciders_only_us", time(1, Timing::queued, deciders)},
                            {"empty_grid_us", time(1, Timing::queued, empty)},
                            {"empty_grid_back_to_back_us", time(kBatch, Timing::queued, empty)},
                            {"empty_grid_alone_us", time(1, Timing::alone, empty)}};
  const auto us = [&](const char* key) { return r[key].get<double>(); };
  out << fmt::format("decision-only detail (GPU time, queued): fused {:.2f} us, {:.2f} us back to "
                     "back, {} CTAs | deciders-only grid {:.2f} us | empty kernel of the grid "
                     "{:.2f} us, {:.2f} us back to back | launched alone on an idle stream "
                     "(host submission included): fused {:.2f} us, empty {:.2f} us\n",
                     us("fused_us"), us("fused_back_to_back_us"), r["grid"].get<int>(),
                     us("deciders_only_us"), us("empty_grid_us"), us("empty_grid_back_to_back_us"),
                     us("fused_alone_us"), us("empty_grid_alone_us"));
  return r;
}

std::int64_t memory_budget() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  MC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(static_cast<double>(free_bytes) * 0.6) - 2 * kMemcpyScratchMax;
}

// 64 layers x 2 states (conv, temporal) = 128 states; 256 requests, none crossing.
BenchCase decision_only_case(std::int64_t budget, std::int32_t sets, std::int64_t cache_bytes) {
  model::GroupSpec g{.name = "mamba",
                     .family = model::Family::mamba2,
                     .params = {.intermediate_size = 256,
                                .n_groups = 1,
                                .num_heads = 8,
                                .head_dim = 16,
                                .state_size = 16,
                                .conv_kernel = 4},
                     .num_layers = 64};
  const model::Preset& p = model::find_preset("mamba2-2.7b");
  return make_bench_case("decision-only 256x128", p.config, {.groups = {g}}, 256, 0, budget, sets,
                         cache_bytes);
}

// linear_attention 1 head of 128 x 128 fp32 = 64 KiB per block per state, 64 layers.
BenchCase block64k_case(std::int32_t reqs, std::int64_t budget, std::int32_t sets,
                        std::int64_t cache_bytes) {
  model::GroupSpec g{.name = "linear",
                     .family = model::Family::linear_attention,
                     .params = {.num_heads = 1, .head_dim = 128},
                     .num_layers = 64,
                     .temporal_elem_size = 4};
  const model::Preset& p = model::find_preset("mamba2-2.7b");
  return make_bench_case(fmt::format("64KiB-per-block"), p.config, {.groups = {g}}, reqs, reqs,
                         budget, sets, cache_bytes);
}

} // namespace

std::optional<BenchGpu> bench_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return std::nullopt;
  cudaDeviceProp prop{};
  MC_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return BenchGpu{.name = prop.name,
                  .memory_budget_bytes = memory_budget(),
                  .cache_bytes = std::int64_t{4} * prop.l2CacheSize};
}

OwnKernelTimes time_own_kernels(const BenchCase& bench, std::int32_t iters) {
  OwnKernelTimes times;
  {
    BenchDevice dev(bench);
    times.fused_us =
        median_us(dev.stream(), iters, 1, Timing::queued, [&](int i) { dev.launch_fused(i); });
    times.bytes_per_launch = dev.bytes_per_launch();
    times.memcpy_us = memcpy_us(dev, times.bytes_per_launch, iters);
  }
  reset_device();
  return times;
}

int run_bench(const BenchOptions& options, std::ostream& out) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    throw model::EnvironmentError("no CUDA device is visible");
  cudaDeviceProp prop{};
  MC_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  out << fmt::format("GPU: {} ({} SMs, {:.1f} GiB, L2 {} MiB); CUDA runtime {}; iters {}; input "
                     "sets at most {}; times are GPU time, launches queued behind a latch\n",
                     prop.name, prop.multiProcessorCount,
                     static_cast<double>(prop.totalGlobalMem) / (1 << 30), prop.l2CacheSize >> 20,
                     CUDART_VERSION, options.iters, options.sets);
  // Input sets are rotated so that L2 cannot hold a launch's data from one timed run to the
  // next: enough of them to touch 4x the L2 (a launch of 1 GiB needs one).
  const std::int64_t cache_bytes = std::int64_t{4} * prop.l2CacheSize;
  const std::vector<std::string>& presets =
      options.presets.empty() ? kDefaultPresets : options.presets;
  const std::vector<std::int32_t> requests =
      options.requests.empty() ? std::vector<std::int32_t>{64, 256} : options.requests;
  nlohmann::json report{
      {"gpu", prop.name},
      {"iters", options.iters},
      {"sets", options.sets},
      {"timing", "queued"},
      {"fused_start", options.ticket_start ? "ticket" : "cooperative where supported"},
      {"cases", nlohmann::json::array()}};
  const BenchCase decide = decision_only_case(memory_budget(), options.sets, cache_bytes);
  report["cases"].push_back(measure(decide, options, out));
  report["decision_only"] = measure_decision_only(decide, options, out);
  std::vector<std::function<BenchCase()>> cases;
  for (const std::string& name : presets)
    for (const std::int32_t reqs : requests)
      cases.emplace_back([&, name, reqs] {
        const model::Preset& p = model::find_preset(name);
        return make_bench_case(name, p.config, p.spec, reqs, reqs, memory_budget(), options.sets,
                               cache_bytes);
      });
  cases.emplace_back(
      [&] { return block64k_case(256, memory_budget(), options.sets, cache_bytes); });
  for (const std::function<BenchCase()>& make : cases) {
    // Each case on a fresh context, as an engine allocates its cache at start-up: the arenas
    // of the case before leave the allocator's mappings fragmented, and on an H100 that cost
    // the 64 KiB-per-block copies 17% (memcpy in the same arena unchanged).
    reset_device();
    report["cases"].push_back(measure(make(), options, out));
  }
  if (!options.json_path.empty())
    model::write_whole_file(options.json_path, report.dump(2) + "\n", "--json");
  return 0;
}

} // namespace mc::gpu
