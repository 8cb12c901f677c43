#include "cli/parallel_option.h"

#include "cli/commands.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

namespace mc::cli {
namespace {

// --devices: every visible device for `all`, else the listed indices in their order.
std::vector<int> parse_devices(const std::string& text, std::optional<int> visible) {
  if (text == "all") {
    if (!visible)
      model::fail_input("--devices all: this build has no CUDA and cannot count the GPUs; list "
                        "them (--devices 0,1)");
    std::vector<int> all(static_cast<std::size_t>(*visible));
    for (int i = 0; i < *visible; ++i)
      all[static_cast<std::size_t>(i)] = i;
    if (all.empty()) model::fail_input("--devices all: this process sees no CUDA device");
    return all;
  }
  std::vector<int> out;
  std::set<int> seen;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty() || item.size() > 4 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      model::fail_input("--devices: expected all or device indices like 0,1, got '{}'", text);
    const int index = std::stoi(item);
    if (!seen.insert(index).second)
      model::fail_input("--devices: device {} is listed twice in '{}'", index, text);
    if (visible && index >= *visible)
      model::fail_input("--devices: no CUDA device {} (this process sees {}{})", index, *visible,
                        *visible > 0 ? fmt::format(": 0..{}", *visible - 1) : "");
    out.push_back(index);
  }
  if (out.empty() || text.back() == ',')
    model::fail_input("--devices: expected all or device indices like 0,1, got '{}'", text);
  return out;
}

} // namespace

void add_parallel_options(CLI::App& cmd, ParallelOptions& o) {
  cmd.add_option("--jobs", o.jobs,
                 "Cases run at once, each in a worker process (default: every core this process "
                 "may use; cuda without MPS: 2 per GPU up to the cores). The report is the same "
                 "for any N");
  cmd.add_option("--devices", o.devices,
                 "cuda and --external: the GPUs the workers use, all or a list like 0,1 (worker "
                 "k gets the k-th, round robin; default all)");
  cmd.add_option("--mps", o.mps,
                 "cuda and --external: share each GPU between the case workers through NVIDIA MPS "
                 "(auto: where "
                 "nvidia-cuda-mps-control is on PATH or CUDA_MPS_PIPE_DIRECTORY names a daemon, "
                 "and a GPU has more than one worker; on; off)");
  cmd.add_option("--workers", o.workers,
                 "--external: adapter workers to start, each running cases beside the others "
                 "(default 1)");
}

std::int64_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return std::max<std::int64_t>(std::thread::hardware_concurrency(), 1);
}

namespace {

// Case workers that use a GPU: cuda's, and --external's where a GPU is visible (an adapter
// running its kernels there).
bool workers_on_gpus(model::Backend backend, std::optional<int> devices_visible) {
  return backend == model::Backend::cuda ||
         (backend == model::Backend::external && devices_visible.value_or(0) > 0);
}

// The options that cannot go together, refused before anything starts.
void check_parallel(const ParallelOptions& o, model::Backend backend, bool no_isolate,
                    std::optional<int> devices_visible, bool mps_available) {
  if (o.mps != "auto" && o.mps != "on" && o.mps != "off")
    model::fail_input("--mps: expected auto, on or off, got '{}'", o.mps);
  const bool on_gpus = workers_on_gpus(backend, devices_visible);
  if (o.mps == "on") {
    if (!on_gpus)
      model::fail_input("--mps on: shares a GPU between the case workers of --backend cuda or "
                        "--external on a GPU");
    if (no_isolate)
      model::fail_input("--mps on: shares a GPU between case workers; --no-isolate runs every "
                        "case in this process");
    if (!mps_available)
      model::fail_input("--mps on: no MPS here (nvidia-cuda-mps-control is not on PATH and "
                        "CUDA_MPS_PIPE_DIRECTORY is not set)");
  }
  if (o.jobs != -1) check_option_range("--jobs", o.jobs, 1, kJobsMax);
  if (o.workers != -1) {
    check_option_range("--workers", o.workers, 1, kJobsMax);
    if (backend != model::Backend::external)
      model::fail_input("--workers: starts adapter workers for --external; the host and cuda "
                        "backends take --jobs N");
    if (o.jobs != -1 && o.jobs != o.workers)
      model::fail_input("--jobs {} and --workers {}: with --external both count the adapter "
                        "workers; give one",
                        o.jobs, o.workers);
  }
  if (!o.devices.empty() && backend == model::Backend::host)
    model::fail_input("--devices: the host backend runs on the CPU; --devices picks the GPUs of "
                      "--backend cuda and --external");
}

// The case workers when --jobs and --workers leave it open: every core on the host; on cuda
// every core under MPS, else kCudaJobsPerDevice per GPU; one adapter for --external.
std::int64_t default_jobs(const ParallelOptions& o, model::Backend backend, std::int64_t cores,
                          std::int64_t devices, bool mps_available) {
  switch (backend) {
  case model::Backend::host:
    return std::min(cores, kJobsMax);
  case model::Backend::cuda:
    return o.mps != "off" && mps_available
               ? std::min(cores, kJobsMax)
               : std::clamp(std::min(cores, kCudaJobsPerDevice * devices), std::int64_t{1},
                            kJobsMax);
  case model::Backend::oracle: // not a campaign's backend
  case model::Backend::external:
    break;
  }
  return 1;
}

// CUDA_VISIBLE_DEVICES for a worker on device `ordinal` of this process: the ordinal-th entry
// of this process's own CUDA_VISIBLE_DEVICES where it has one, else the ordinal.
std::string visible_device(int ordinal, const std::optional<std::string>& own_visible) {
  MC_ASSERT(ordinal >= 0);
  if (!own_visible) return std::to_string(ordinal);
  std::istringstream items(*own_visible);
  std::string item;
  for (int i = 0; std::getline(items, item, ','); ++i)
    if (i == ordinal) return item;
  return std::to_string(ordinal); // not reached for a device cudaGetDeviceCount counted
}

} // namespace

Parallel resolve_parallel(const ParallelOptions& o, model::Backend backend, bool no_isolate,
                          std::int64_t cores, std::optional<int> devices_visible,
                          bool mps_available) {
  MC_ASSERT(cores >= 1);
  check_parallel(o, backend, no_isolate, devices_visible, mps_available);
  const bool on_gpus = workers_on_gpus(backend, devices_visible);
  Parallel p{.devices_visible = devices_visible};
  if (no_isolate) {
    if (o.jobs > 1)
      model::fail_input("--jobs {}: --no-isolate runs one case at a time in this process", o.jobs);
    if (!o.devices.empty() || o.workers != -1)
      model::fail_input("--{}: needs case workers; --no-isolate runs every case in this process",
                        o.devices.empty() ? "workers" : "devices");
    return p;
  }
  p.workers = true;
  if (!o.devices.empty())
    p.devices = parse_devices(o.devices, devices_visible);
  else if (backend == model::Backend::cuda ||
           (backend == model::Backend::external && devices_visible.value_or(0) > 1))
    p.devices = parse_devices("all", devices_visible);
  const auto devices = static_cast<std::int64_t>(p.devices.size());
  std::int64_t jobs = o.workers != -1 ? o.workers : o.jobs;
  if (jobs == -1) jobs = default_jobs(o, backend, cores, devices, mps_available);
  p.jobs = static_cast<int>(jobs);
  // With one worker per GPU there is nothing to share.
  p.mps = on_gpus && mps_available &&
          (o.mps == "on" || (o.mps == "auto" && jobs > std::max<std::int64_t>(devices, 1)));
  return p;
}

fuzz::CaseWorkerStart case_worker_start(const Parallel& p, nlohmann::json backend) {
  MC_ASSERT(p.workers);
  fuzz::CaseWorkerStart start;
  start.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "case-worker"};
  const char* own = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> own_visible =
      own != nullptr ? std::optional<std::string>(own) : std::nullopt;
  for (int k = 0; k < p.jobs; ++k) {
    std::vector<std::string> env{fmt::format("MC_CASE_WORKER={}", k)};
    if (!p.devices.empty()) {
      const int device = p.devices[static_cast<std::size_t>(k) % p.devices.size()];
      env.push_back(fmt::format("CUDA_VISIBLE_DEVICES={}", visible_device(device, own_visible)));
    }
    start.environment.push_back(std::move(env));
  }
  start.setup["backend"] = std::move(backend);
  return start;
}

std::string devices_line(const Parallel& p) {
  if (p.devices.empty()) return {};
  const std::size_t n = p.devices.size();
  std::string list;
  for (std::size_t i = 0; i < n && i < static_cast<std::size_t>(p.jobs); ++i) {
    // Workers i, i + n, i + 2n, ... use device i of the list.
    const int workers =
        (p.jobs - static_cast<int>(i) + static_cast<int>(n) - 1) / static_cast<int>(n);
    list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", p.devices[i], workers);
  }
  return fmt::format("{} case worker{} on CUDA devices {}", p.jobs, p.jobs == 1 ? "" : "s", list);
}

} // namespace mc::cli
