// How many cases a fuzz campaign runs at once, and on which GPUs: `--jobs N`, `--devices
// all|0,1,...` and, for `--external`, `--workers N`. Every case runs in a case worker
// (fuzz/case_workers.h), a process of this program of its own, whatever the backend:
//
//   host        --jobs N workers, default every core this process may use (its CPU affinity)
//   cuda        --jobs N workers over the devices of --devices (default all): worker k gets
//               device list[k % len]; default jobs every core where the workers share their
//               GPUs through MPS (--mps, cli/mps.h), else min(cores, kCudaJobsPerDevice x
//               devices)
//   --external  --workers N workers (--jobs N says the same), each with an adapter worker of
//               its own, pinned like cuda workers where --devices is given or several GPUs
//               are visible; default 1
//
// A worker is pinned to its GPU through CUDA_VISIBLE_DEVICES in its environment, set before it
// starts: it (and an adapter it starts, and any library either loads) sees that one device as
// device 0, so nothing in it can touch another GPU or make a context there, and the kernels,
// which run on device 0, need no device argument. Where this process itself runs under
// CUDA_VISIBLE_DEVICES, index k of --devices is its k-th entry, as cudaGetDeviceCount counts.
//
// `--no-isolate` runs every case in this process, one at a time: it refuses --jobs above 1,
// --devices and --workers. Values that cannot run are one line, exit 2.
#pragma once

#include "fuzz/case_workers.h"
#include "model/backend.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::cli {

inline constexpr std::int64_t kJobsMax = 1024;
// Case workers per GPU by default without MPS. Each holds a CUDA context of its own, and one GPU
// runs one context at a time: a case's device work is short (allocations, copies, a launch, a
// scan), so more contexts mostly add switches. Measured on an H100 with 16 cores, the default
// 2000-case kernel campaign: 204 cases/s with 1 worker, 282 with 2, 193 with 4, 172 with 8,
// 148 with 16 (docs/measurements.md). --jobs sets any other number.
inline constexpr std::int64_t kCudaJobsPerDevice = 2;

struct ParallelOptions {
  std::int64_t jobs = -1;    // --jobs; -1: not given
  std::int64_t workers = -1; // --workers; -1: not given
  std::string devices;       // --devices; empty: not given
  std::string mps = "auto";  // --mps: auto, on or off
};

void add_parallel_options(CLI::App& cmd, ParallelOptions& options);

struct Parallel {
  int jobs = 1;
  bool workers = false;     // cases in case workers (false: in this process, --no-isolate)
  std::vector<int> devices; // the devices worker k % size uses (empty: not pinned)
  // The number of CUDA devices visible, nullopt where this build cannot count them.
  std::optional<int> devices_visible;
  // cuda: the workers share their GPUs through an MPS server (cli/mps.h).
  bool mps = false;
};

// Throws InputError (one line) for values that cannot run. `cores`: the cores this process may
// use; `devices_visible`: gpu::cuda_device_count(); `mps_available`: cli::mps_available().
// --mps auto uses MPS for cuda workers where it is available and more than one worker shares a
// GPU; on requires it; off never uses it.
Parallel resolve_parallel(const ParallelOptions& options, model::Backend backend, bool no_isolate,
                          std::int64_t cores, std::optional<int> devices_visible,
                          bool mps_available = false);

// Every core this process may run on (a Slurm allocation, taskset or a cpuset narrows it).
std::int64_t usable_cores();

// The start of a campaign's case workers: this program's case-worker subcommand, each worker
// its slot (MC_CASE_WORKER) and GPU, `backend` as the worker makes it (setup["backend"]).
fuzz::CaseWorkerStart case_worker_start(const Parallel& parallel, nlohmann::json backend);

// "16 case workers on CUDA devices 0, 1 (8 each)", or empty when the workers are not pinned.
std::string devices_line(const Parallel& parallel);

} // namespace mc::cli
