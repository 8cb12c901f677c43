// The cuda executor: device arenas that live for the whole run, poisoned as the oracle's host
// arenas start; launches run the cuda backend's kernels in place over them
// (run_launch_cuda_in_place) and the forward runs forward_kernel.cu. Each call uploads the
// step's small arrays (block tables, per-request arrays, forward ops and tokens), waits for
// the GPU, and downloads only what it returns; arenas() downloads the arenas.
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "gpu/device_memory.h"
#include "gpu/engine/compare_launch.h"
#include "gpu/engine/executor.h"
#include "gpu/engine/forward_launch.h"
#include "gpu/launch_plan.h"
#include "model/block_copy.h"
#include "model/errors.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

namespace mc::gpu::engine {
namespace {

// Staging for the poison fill: a whole number of poison periods, so every copy of it lands in
// phase with the pattern (model/arena.h).
constexpr std::int64_t kPoisonStagingBytes =
    ((std::int64_t{64} << 20) / model::kPoisonPeriod) * model::kPoisonPeriod;

DeviceBuffer poisoned_device_arena(std::int64_t size_bytes) {
  DeviceBuffer arena(size_bytes);
  model::Arena staging(std::min(size_bytes, kPoisonStagingBytes));
  staging.poison();
  for (std::int64_t off = 0; off < size_bytes; off += staging.size_bytes()) {
    const std::int64_t n = std::min(staging.size_bytes(), size_bytes - off);
    MC_CUDA_CHECK(cudaMemcpy(arena.as<std::byte>() + off, staging.data(),
                             static_cast<std::size_t>(n), cudaMemcpyHostToDevice));
  }
  return arena;
}

class CudaExecutor final : public Executor {
public:
  CudaExecutor(const model::Layout& layout, Mutant kernel_mutant)
      : layout_(layout), kernel_mutant_(kernel_mutant) {
    if (!device_present()) throw model::EnvironmentError("no CUDA device is visible");
    on_device([&] {
      std::vector<std::uint64_t> addrs;
      for (const model::ArenaSpec& a : layout_.arenas) {
        arenas_.push_back(poisoned_device_arena(a.size_bytes()));
        addrs.push_back(arenas_.back().address());
      }
      in_place_.emplace(layout_, addrs);
      device_forward_tensors_ = upload_vector<ForwardTensor>(make_forward_tensors(layout_, addrs));
      device_arena_addrs_ = upload_vector<std::uint64_t>(addrs);
      device_poison_ = upload_vector<std::uint8_t>(
          std::span(model::poison_pattern_bytes(), static_cast<std::size_t>(model::kPoisonPeriod)));
    });
  }

  model::LaunchResult launch(model::LaunchCase& launch_case) override {
    if (!launch_case.arenas.empty())
      throw model::InputError("cuda executor: a launch brings no arenas of its own");
    validate_case_arrays(launch_case);
    model::LaunchResult result;
    result.requests = prepare_request_arrays(launch_case);
    on_device([&] { run_launch_cuda_in_place(launch_case, kernel_mutant_, *in_place_, result); });
    return result;
  }

  std::vector<std::uint64_t> forward(const model::BlockTables& tables,
                                     const std::vector<ForwardOp>& ops,
                                     const std::vector<ForwardRead>& reads,
                                     const std::vector<std::int32_t>& tokens) override {
    std::vector<std::uint64_t> diffs(reads.size() * layout_.tensors.size(), 0);
    if (ops.empty() && reads.empty()) return diffs;
    on_device([&] {
      ForwardParams p = make_forward_params(layout_, tables, static_cast<std::int32_t>(ops.size()));
      const DeviceBuffer d_ops = upload_vector<ForwardOp>(ops);
      const DeviceBuffer d_tokens = upload_vector<std::int32_t>(tokens);
      const DeviceBuffer d_reads = upload_vector<ForwardRead>(reads);
      const DeviceBuffer d_read_diffs(static_cast<std::int64_t>(
          reads.size() * layout_.tensors.size() * sizeof(std::uint64_t))); // zero-filled
      std::vector<DeviceBuffer> d_tables;
      for (std::size_t g = 0; g < tables.groups.size(); ++g) {
        d_tables.push_back(upload_vector<std::int32_t>(tables.groups[g].block_ids));
        p.block_tables[g] = d_tables.back().address();
      }
      p.tensors = device_forward_tensors_.as<ForwardTensor>();
      p.ops = d_ops.as<ForwardOp>();
      p.tokens = d_tokens.as<std::int32_t>();
      p.reads = d_reads.as<ForwardRead>();
      p.read_diffs = d_read_diffs.as<std::uint64_t>();
      p.num_reads = static_cast<std::int32_t>(reads.size());
      launch_forward(p, nullptr);
      MC_CUDA_CHECK(cudaDeviceSynchronize());
      if (!diffs.empty())
        MC_CUDA_CHECK(cudaMemcpy(diffs.data(),
                                 reinterpret_cast<const void*>(d_read_diffs.address()),
                                 diffs.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
    });
    return diffs;
  }

  // A CUDA graph per batch size, captured on the executor's stream at the first step of its
  // shape: a memset of its read differences, the read and forward kernels, their parameters
  // pointing at input buffers kept with it. A replay copies the step's inputs into those
  // buffers (cudaMemcpyAsync on the same stream) and launches the graph.
  std::vector<std::uint64_t> replay_graph(const GraphInputs& in, bool fresh_buffers) override {
    check_graph_inputs(in, static_cast<std::size_t>(layout_.num_groups()));
    std::vector<std::uint64_t> diffs(in.reads.size() * layout_.tensors.size(), 0);
    on_device([&] {
      if (stream_ == nullptr)
        MC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      auto [it, capture] = graphs_.try_emplace(in.shape.batch_size);
      DeviceGraph& g = it->second;
      if (!capture && !(g.shape == in.shape)) {
        g.release();
        g = DeviceGraph{}; // a larger shape than captured: captured anew
        capture = true;
      }
      if (capture) g.shape = in.shape;
      if (capture || fresh_buffers) g.buffers.push_back(GraphBuffers(in, layout_.tensors.size()));
      // The graph's stream does not wait for the legacy one: the step's launches and the
      // zero-fill of new buffers (cudaMemset in DeviceBuffer) must be done before its uploads.
      MC_CUDA_CHECK(cudaStreamSynchronize(nullptr));
      // The captured buffers are the front ones (the back ones too, at a capture).
      upload(fresh_buffers ? g.buffers.back() : g.buffers.front(), in);
      if (capture) capture_graph(g);
      MC_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
      MC_CUDA_CHECK(cudaMemcpyAsync(diffs.data(), g.buffers.back().read_diffs.data(),
                                    diffs.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost,
                                    stream_));
      MC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    });
    return diffs;
  }

  ~CudaExecutor() override {
    on_device([&] {
      for (auto& [size, g] : graphs_)
        g.release();
      if (stream_ != nullptr) cudaStreamDestroy(stream_);
    });
  }
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  void copy_blocks(std::span<const model::BlockCopy> copies) override {
    // No block is both a source and a destination (model/block_copy.h): in order is as vLLM's
    // gather then scatter. Synchronised, as the launches and graphs after it use other streams.
    on_device([&] {
      for (const model::BlockCopy& c : copies)
        for (const model::BlockCopyRange& r : model::block_copy_ranges(layout_, c)) {
          std::byte* base = arenas_[static_cast<std::size_t>(r.src.arena)].as<std::byte>();
          MC_CUDA_CHECK(cudaMemcpyAsync(base + r.dst.offset_bytes, base + r.src.offset_bytes,
                                        static_cast<std::size_t>(r.src.size_bytes),
                                        cudaMemcpyDeviceToDevice, nullptr));
        }
      MC_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    });
  }

  const std::vector<model::Arena>& arenas() override {
    on_device([&] {
      host_arenas_.clear();
      for (const DeviceBuffer& a : arenas_)
        host_arenas_.push_back(download_arena(a));
    });
    return host_arenas_;
  }

  // The expected bytes made on the device (compare_kernel.cu): the description goes up in one
  // copy into a buffer kept for the run, and per range only its first differing byte comes back.
  std::vector<std::int64_t> compare(const model::ExpectedStates& expected) override {
    const std::size_t n = expected.ranges.size();
    if (n == 0) return {};
    // One upload: [ranges | rows | tile starts | first differences], each part 8-aligned.
    const std::size_t ranges_bytes = n * sizeof(model::ExpectedRange);
    const std::size_t rows_bytes = expected.rows.size() * sizeof(model::ExpectedRow);
    const std::size_t starts_bytes = (n + 1) * sizeof(std::int64_t);
    const std::size_t first_bytes = n * sizeof(unsigned long long);
    static_assert(sizeof(model::ExpectedRange) % 8 == 0 && sizeof(model::ExpectedRow) % 8 == 0);
    compare_staging_.resize(ranges_bytes + rows_bytes + starts_bytes + first_bytes);
    std::byte* up = compare_staging_.data();
    std::memcpy(up, expected.ranges.data(), ranges_bytes);
    if (rows_bytes > 0) std::memcpy(up + ranges_bytes, expected.rows.data(), rows_bytes);
    auto* tile_starts = reinterpret_cast<std::int64_t*>(up + ranges_bytes + rows_bytes);
    tile_starts[0] = 0;
    for (std::size_t i = 0; i < n; ++i)
      tile_starts[i + 1] =
          tile_starts[i] +
          (expected.ranges[i].range.size_bytes + kCompareTileBytes - 1) / kCompareTileBytes;
    std::memset(up + ranges_bytes + rows_bytes + starts_bytes, 0xFF, first_bytes);
    std::vector<unsigned long long> first(n);
    on_device([&] {
      const auto total = static_cast<std::int64_t>(compare_staging_.size());
      if (compare_buffer_.size_bytes() < total) compare_buffer_ = DeviceBuffer(2 * total);
      std::byte* down = compare_buffer_.as<std::byte>();
      MC_CUDA_CHECK(cudaMemcpy(down, up, compare_staging_.size(), cudaMemcpyHostToDevice));
      auto* d_first =
          reinterpret_cast<unsigned long long*>(down + ranges_bytes + rows_bytes + starts_bytes);
      launch_compare(
          {.ranges = reinterpret_cast<const model::ExpectedRange*>(down),
           .num_ranges = static_cast<std::int32_t>(n),
           .rows = reinterpret_cast<const model::ExpectedRow*>(down + ranges_bytes),
           .tile_starts = reinterpret_cast<const std::int64_t*>(down + ranges_bytes + rows_bytes),
           .arena_addrs = device_arena_addrs_.as<std::uint64_t>(),
           .poison = device_poison_.as<std::uint8_t>(),
           .first = d_first},
          tile_starts[n], nullptr);
      MC_CUDA_CHECK(cudaMemcpy(first.data(), d_first, first_bytes, cudaMemcpyDeviceToHost));
    });
    std::vector<std::int64_t> out(n);
    for (std::size_t i = 0; i < n; ++i)
      out[i] = first[i] == ~0ULL ? -1 : static_cast<std::int64_t>(first[i]);
    return out;
  }
  bool compares_where_bytes_are() const override { return true; }

  std::vector<std::span<const std::byte>> read(std::span<const model::ArenaRange> ranges) override {
    std::int64_t total = 0;
    for (const model::ArenaRange& r : ranges)
      total += r.size_bytes;
    staging_.resize(static_cast<std::size_t>(total));
    std::vector<std::span<const std::byte>> out;
    out.reserve(ranges.size());
    on_device([&] {
      std::int64_t at = 0;
      for (const model::ArenaRange& r : ranges) {
        const DeviceBuffer& a = arenas_[static_cast<std::size_t>(r.arena)];
        MC_CUDA_CHECK(cudaMemcpyAsync(staging_.data() + at, a.as<std::byte>() + r.offset_bytes,
                                      static_cast<std::size_t>(r.size_bytes),
                                      cudaMemcpyDeviceToHost, nullptr));
        out.emplace_back(staging_.data() + at, static_cast<std::size_t>(r.size_bytes));
        at += r.size_bytes;
      }
      MC_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    });
    return out;
  }

private:
  struct GraphBuffers {
    GraphBuffers(const GraphInputs& in, std::size_t num_tensors)
        : ops(bytes_of(in.ops)), reads(bytes_of(in.reads)), tokens(bytes_of(in.tokens)),
          read_diffs(
              static_cast<std::int64_t>(in.reads.size() * num_tensors * sizeof(std::uint64_t))) {
      for (const std::vector<std::int32_t>& ids : in.state_indices)
        state_indices.emplace_back(bytes_of(ids));
    }
    std::vector<DeviceBuffer> state_indices; // per group
    DeviceBuffer ops, reads, tokens, read_diffs;
  };
  struct DeviceGraph {
    GraphShape shape;
    std::vector<GraphBuffers> buffers; // front: the ones captured
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    void release() {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
      exec = nullptr;
      graph = nullptr;
    }
  };

  template <class T> static std::int64_t bytes_of(const std::vector<T>& v) {
    return static_cast<std::int64_t>(v.size() * sizeof(T));
  }
  template <class T> void copy_up(const DeviceBuffer& dst, const std::vector<T>& v) {
    MC_CUDA_CHECK(cudaMemcpyAsync(dst.data(), v.data(), v.size() * sizeof(T),
                                  cudaMemcpyHostToDevice, stream_));
  }
  void upload(const GraphBuffers& b, const GraphInputs& in) {
    for (std::size_t g = 0; g < in.state_indices.size(); ++g)
      copy_up(b.state_indices[g], in.state_indices[g]);
    copy_up(b.ops, in.ops);
    copy_up(b.reads, in.reads);
    copy_up(b.tokens, in.tokens);
  }
  void capture_graph(DeviceGraph& g) {
    const GraphBuffers& b = g.buffers.front();
    ForwardParams p = make_graph_params(layout_, g.shape);
    p.tensors = device_forward_tensors_.as<ForwardTensor>();
    p.ops = b.ops.as<ForwardOp>();
    p.tokens = b.tokens.as<std::int32_t>();
    p.reads = b.reads.as<ForwardRead>();
    p.read_diffs = b.read_diffs.as<std::uint64_t>();
    for (std::size_t k = 0; k < b.state_indices.size(); ++k)
      p.block_tables[k] = b.state_indices[k].address();
    MC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    MC_CUDA_CHECK(cudaMemsetAsync(b.read_diffs.data(), 0,
                                  static_cast<std::size_t>(b.read_diffs.size_bytes()), stream_));
    launch_forward(p, stream_);
    MC_CUDA_CHECK(cudaStreamEndCapture(stream_, &g.graph));
    MC_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  }

  model::Layout layout_;
  Mutant kernel_mutant_ = Mutant::none;
  std::vector<DeviceBuffer> arenas_;     // the run's state, on the device
  std::optional<DeviceArenas> in_place_; // launches' view of arenas_
  DeviceBuffer device_forward_tensors_;
  DeviceBuffer device_arena_addrs_;            // the arenas' addresses, for the compare kernel
  DeviceBuffer device_poison_;                 // the arena poison pattern, for the compare kernel
  DeviceBuffer compare_buffer_;            // compare()'s description and answers, grown as needed
  std::vector<std::byte> compare_staging_; // the same on the host
  std::vector<model::Arena> host_arenas_;      // the last download
  std::vector<std::byte> staging_;             // the last read()
  cudaStream_t stream_ = nullptr;              // the graphs' (created at the first)
  std::map<std::int32_t, DeviceGraph> graphs_; // by batch size
};

} // namespace

std::unique_ptr<Executor> make_cuda_executor(const model::Layout& layout, Mutant kernel_mutant) {
  return std::make_unique<CudaExecutor>(layout, kernel_mutant);
}

} // namespace mc::gpu::engine
