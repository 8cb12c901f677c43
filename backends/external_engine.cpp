#include "backends/external_engine.h"

#include "gpu/launch_plan.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/process.h"
#include "model/request_arrays.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string_view>

namespace mc::backends {

constexpr std::int64_t kShmPageBytes = 4096;
constexpr std::int64_t kGuardHiBytesMax = std::int64_t{64} << 20;
constexpr unsigned char kGuardByte = 0xC3; // the adapter's GUARD_BYTE

namespace {

using json = nlohmann::json;

std::int64_t round_up(std::int64_t n, std::int64_t m) {
  return (n + m - 1) / m * m;
}

struct Region {
  std::int64_t offset = 0; // of the arena's first byte in the file
  std::int64_t size = 0;
  std::int64_t guard_lo = 0, guard_hi = 0;
};

void fill_guard(int fd, std::int64_t offset, std::int64_t size) {
  const std::vector<unsigned char> guard(static_cast<std::size_t>(std::min(size, kGuardHiBytesMax)),
                                         kGuardByte);
  for (std::int64_t done = 0; done < size;) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(size - done, guard.size()));
    const ssize_t w = pwrite(fd, guard.data(), n, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw model::EnvironmentError(
          fmt::format("cannot write the shared arenas' guards: {}", std::strerror(errno)));
    done += w;
  }
}

} // namespace

// Runs each launch through the worker over arenas in shared memory; the forward, reads and
// comparisons go through a host executor over the same arenas.
class ExternalEngineExecutor final : public gpu::engine::Executor {
public:
  ExternalEngineExecutor(ExternalEngineSource& source, const model::Layout& layout)
      : worker_(source.worker()) {
    shm_ = model::Fd(memfd_create("mambacheck-arenas", MFD_CLOEXEC));
    if (shm_.get() < 0)
      throw model::EnvironmentError(
          fmt::format("--external: cannot create shared memory (memfd): {}", std::strerror(errno)));
    std::int64_t file_bytes = 0; // so far
    for (const model::ArenaSpec& a : layout.arenas) {
      Region r{.guard_lo = kShmPageBytes};
      r.offset = file_bytes + r.guard_lo;
      r.size = a.size_bytes();
      r.guard_hi = round_up(std::min(std::max(a.page_bytes, kShmPageBytes), kGuardHiBytesMax),
                            kShmPageBytes);
      file_bytes = round_up(r.offset + r.size + r.guard_hi, kShmPageBytes);
      regions_.push_back(r);
    }
    if (ftruncate(shm_.get(), static_cast<off_t>(file_bytes)) != 0)
      throw model::EnvironmentError(
          fmt::format("--external: cannot size shared memory to {} bytes: {}", file_bytes,
                      std::strerror(errno)));
    std::vector<model::Arena> arenas;
    json regions = json::array();
    for (const Region& r : regions_) {
      fill_guard(shm_.get(), r.offset - r.guard_lo, r.guard_lo);
      fill_guard(shm_.get(), r.offset + r.size, r.guard_hi);
      arenas.push_back(model::Arena::map_shared(shm_.get(), r.offset, r.size));
      arenas.back().poison();
      regions.push_back({{"offset", r.offset},
                         {"size", r.size},
                         {"guard_lo", r.guard_lo},
                         {"guard_hi", r.guard_hi}});
    }
    host_ = gpu::engine::make_host_executor(layout, std::move(arenas));
    const json open{{"op", "open"},
                    {"shm", fmt::format("/proc/{}/fd/{}", getpid(), shm_.get())},
                    {"file_bytes", file_bytes},
                    {"arenas", std::move(regions)},
                    {"case", json::parse(model::case_layout_json(layout))}};
    if (const json answer = send(open); answer != "ok") bad_answer("open", answer.dump());
    restarts_at_open_ = worker_.restarts();
  }

  ~ExternalEngineExecutor() override {
    // A worker that died since (or was started again) holds no session of ours.
    if (worker_.crashed() || worker_.restarts() != restarts_at_open_) return;
    try {
      worker_.request(R"(engine {"op":"close"})");
    } catch (...) { // NOLINT(bugprone-empty-catch): the run is over; the next open tells
    }
  }

  model::LaunchResult launch(model::LaunchCase& launch_case) override {
    gpu::validate_case_arrays(launch_case);
    model::LaunchResult result;
    result.requests = gpu::prepare_request_arrays(launch_case);
    const model::BlockTables& tables = launch_case.block_tables;
    json message{{"op", "launch"},
                 {"kind", model::to_string(launch_case.kind)},
                 {"num_reqs", launch_case.num_reqs},
                 {"num_slots", launch_case.num_slots},
                 {"num_rows", tables.groups.front().num_rows},
                 {"row_width", tables.groups.front().row_width},
                 {"row_stride", tables.groups.front().row_stride}};
    json& table_list = message["tables"] = json::array();
    for (const model::BlockTable& t : tables.groups)
      table_list.push_back(t.block_ids);
    json& arrays = message["arrays"] = json::object();
    for (const model::RequestArrayField& f : model::kRequestArrays)
      if (const std::vector<std::int32_t>& v = result.requests.*(f.member); !v.empty())
        arrays[std::string(f.name)] = v;
    const json answer = send(message);
    if (!answer.is_object() || !answer.contains("status") || !answer["status"].is_string())
      bad_answer("launch", answer.dump());
    const std::string status = answer["status"].get<std::string>();
    if (status == "unsupported") {
      result.status = model::LaunchStatus::unsupported;
      result.unsupported_reason = answer.contains("reason") && answer["reason"].is_string()
                                      ? answer["reason"].get<std::string>()
                                      : std::string();
    } else if (status != "ok") {
      bad_answer("launch", answer.dump());
    }
    if (answer.contains("arrays")) {
      const json& got = answer["arrays"];
      if (!got.is_object()) bad_answer("launch", answer.dump());
      for (const model::RequestArrayField& f : model::kRequestArrays) {
        const auto it = got.find(std::string(f.name));
        if (it == got.end()) continue;
        try {
          result.requests.*(f.member) = it->get<std::vector<std::int32_t>>();
        } catch (const json::exception&) {
          bad_answer("launch", fmt::format("arrays.{} is not a list of int32", f.name));
        }
      }
    }
    return result;
  }

  // The forward is this program's own (only the state-management launches are the module's):
  // it reads and writes the shared arenas on the host.
  std::vector<std::uint64_t> forward(const model::BlockTables& tables,
                                     const std::vector<gpu::engine::ForwardOp>& ops,
                                     const std::vector<gpu::engine::ForwardRead>& reads,
                                     const std::vector<std::int32_t>& tokens) override {
    return host_->forward(tables, ops, reads, tokens);
  }
  std::vector<std::uint64_t> replay_graph(const gpu::engine::GraphInputs& in,
                                          bool fresh_buffers) override {
    return host_->replay_graph(in, fresh_buffers);
  }
  std::vector<std::string> forward_kernels() const override { return worker_.forward_kernels(); }

  gpu::engine::ForwardKernelReport
  run_forward_kernels(const gpu::engine::ForwardKernelStep& step) override {
    json message{{"op", "forward"},
                 {"kernels", step.kernels},
                 {"num_blocks", step.num_blocks},
                 {"state_len", step.state_len},
                 {"conv_width", step.conv_width},
                 {"rows", step.rows},
                 {"width", step.width},
                 {"state_indices", step.state_indices}};
    if (!step.num_accepted.empty()) {
      message["num_accepted"] = step.num_accepted;
      message["query_start_loc"] = step.query_start_loc;
    }
    if (!step.prefill_indices.empty()) {
      message["prefill_state_indices"] = step.prefill_indices;
      message["prefill_query_start_loc"] = step.prefill_query_start_loc;
      std::vector<bool> initial;
      for (const std::uint8_t i : step.prefill_initial)
        initial.push_back(i != 0);
      message["prefill_has_initial_state"] = initial;
    }
    // All mode: the rows are whole block-table rows, indexed by the metadata's block indices
    // (the worker gathers the decode kernels' columns as the mixer does).
    if (step.all_mode) {
      message["block_size"] = step.block_size;
      message["block_idx_last_computed"] = step.last_computed;
      message["block_idx_last_scheduled"] = step.last_scheduled;
      if (!step.prefill_indices.empty()) {
        message["prefill_width"] = step.prefill_width;
        message["prefill_block_idx_first_scheduled"] = step.prefill_first;
        message["prefill_block_idx_last_scheduled"] = step.prefill_last;
        message["prefill_block_idx_last_computed"] = step.prefill_last_computed;
      }
    }
    const json answer = send(message);
    gpu::engine::ForwardKernelReport report;
    try {
      const auto state_writes = [&](const char* kernel, std::vector<gpu::engine::SsmWrite>& out,
                                    std::vector<std::string>& outside) {
        if (!answer.contains(kernel)) return;
        for (const json& w : answer.at(kernel).at("writes"))
          out.push_back({.block = w.at(0).get<std::int32_t>(),
                         .source = w.at(1).get<std::int32_t>(),
                         .tokens = w.at(2).get<std::int32_t>()});
        outside = answer.at(kernel).at("outside").get<std::vector<std::string>>();
      };
      state_writes("ssm", report.ssm, report.ssm_outside);
      state_writes("scan", report.scan, report.scan_outside);
      if (answer.contains("conv")) {
        for (const json& w : answer.at("conv").at("writes")) {
          gpu::engine::ConvWrite c{.block = w.at(0).get<std::int32_t>()};
          for (const json& r : w.at(1))
            c.rows.push_back({r.at(0).get<std::int32_t>(), r.at(1).get<std::int32_t>()});
          report.conv.push_back(std::move(c));
        }
        report.conv_outside = answer.at("conv").at("outside").get<std::vector<std::string>>();
      }
    } catch (const json::exception& e) {
      bad_answer("forward", fmt::format("{} ({})", answer.dump(), e.what()));
    }
    return report;
  }

  // On the shared arenas: the worker uploads the pages they changed before its next launch.
  void copy_blocks(std::span<const model::BlockCopy> copies) override {
    host_->copy_blocks(copies);
  }
  const std::vector<model::Arena>& arenas() override { return host_->arenas(); }
  std::vector<std::span<const std::byte>> read(std::span<const model::ArenaRange> ranges) override {
    return host_->read(ranges);
  }
  bool records_decisions() const override { return false; }

private:
  // Sends one engine message; the parsed answer (`ok` is the string "ok"). A kernel error, a
  // crash or a timeout become KernelFailure: a finding at the step.
  json send(const json& message) {
    std::string answer;
    try {
      answer = worker_.request("engine " + message.dump());
    } catch (const ExternalKernelError& e) {
      throw gpu::engine::KernelFailure("kernel-error", e.what());
    } catch (const ExternalWorkerCrash& e) {
      throw gpu::engine::KernelFailure(e.timed_out ? "timeout" : "crash", e.what());
    }
    if (answer == "ok") return "ok";
    json parsed = json::parse(answer, nullptr, false);
    if (parsed.is_discarded()) bad_answer(message.value("op", "?"), answer);
    return parsed;
  }

  [[noreturn]] void bad_answer(std::string_view op, std::string_view answer) {
    constexpr std::size_t kQuoted = 300;
    throw ExternalWorkerFailure{fmt::format(
        "--external worker '{}' answered an engine {} with \"{}{}\"; expected {}",
        worker_.options().command.substr(0, kQuoted), op, answer.substr(0, kQuoted),
        answer.size() > kQuoted ? "..." : "",
        op == "launch"    ? R"({"status": "ok"|"unsupported", "arrays": {...}} or error:)"
        : op == "forward" ? R"({"ssm": {"writes": [...], "outside": [...]}, "conv": ...})"
                          : "ok")};
  }

  ExternalWorker& worker_;
  model::Fd shm_; // the memfd, closed when the executor goes
  std::vector<Region> regions_;
  std::unique_ptr<gpu::engine::Executor> host_;
  std::int64_t restarts_at_open_ = 0;
};

ExternalEngineSource::ExternalEngineSource(ExternalOptions options) {
  worker_ = std::make_unique<ExternalWorker>(std::move(options));
  if (!worker_->serves_engine())
    throw ExternalWorkerFailure{fmt::format(
        "--external worker '{}' does not serve the engine protocol (its greeting \"{}\" has no "
        "engine=1): the engine level needs a worker that runs launches on shared arenas "
        "(adapters/python/README.md, \"Engine protocol\")",
        worker_->options().command, worker_->greeting())};
}

std::unique_ptr<gpu::engine::Executor> ExternalEngineSource::make(const model::Layout& layout) {
  return std::make_unique<ExternalEngineExecutor>(*this, layout);
}

std::unique_ptr<ExternalEngineSource> start_external_engine(const std::string& command,
                                                            double timeout_seconds,
                                                            const std::filesystem::path& log_file) {
  if (!log_file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(log_file.parent_path(), ec);
    if (ec)
      model::fail_input("cannot create {}: {}", log_file.parent_path().string(), ec.message());
  }
  auto source =
      std::make_unique<ExternalEngineSource>(ExternalOptions{.command = command,
                                                             .work_dir = {},
                                                             .log_file = log_file,
                                                             .timeout_seconds = timeout_seconds});
  std::cout << fmt::format("external worker (engine level): {} (kinds {}{})\n",
                           source->worker().greeting().substr(0, 300),
                           fmt::join(fuzz::kind_names(source->kinds()), ","),
                           log_file.empty() ? "" : "; stderr in " + log_file.string())
            << std::flush;
  return source;
}

} // namespace mc::backends
