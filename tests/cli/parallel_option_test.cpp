// --jobs, --devices and --workers (cli/parallel_option.h) against device counts this machine
// does not have: defaults per backend, worker k on device list[k % len], every refusal one line.
#include "cli/parallel_option.h"
#include "model/errors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace mc::cli {
namespace {

Parallel resolve(model::Backend backend, std::optional<int> visible, std::int64_t cores = 16,
                 ParallelOptions options = {}, bool no_isolate = false, bool mps = false) {
  return resolve_parallel(options, backend, no_isolate, cores, visible, mps);
}

std::string refusal(model::Backend backend, std::optional<int> visible, ParallelOptions options,
                    bool no_isolate = false, bool mps = false) {
  try {
    resolve(backend, visible, 16, options, no_isolate, mps);
  } catch (const model::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Where MPS is available the cuda workers share each GPU at once: every core by default, and
// MPS only where a GPU has more than one worker.
TEST(ParallelOption, CudaWithMpsTakesEveryCore) {
  const Parallel all = resolve(model::Backend::cuda, 2, 16, {}, false, true);
  EXPECT_EQ(all.jobs, 16);
  EXPECT_TRUE(all.mps);
  EXPECT_EQ(all.devices, (std::vector<int>{0, 1}));
  const Parallel off = resolve(model::Backend::cuda, 2, 16, {.mps = "off"}, false, true);
  EXPECT_EQ(off.jobs, 4);
  EXPECT_FALSE(off.mps);
  const Parallel one_each = resolve(model::Backend::cuda, 2, 16, {.jobs = 2}, false, true);
  EXPECT_FALSE(one_each.mps);
  EXPECT_TRUE(resolve(model::Backend::cuda, 2, 16, {.jobs = 2, .mps = "on"}, false, true).mps);
  const Parallel unavailable = resolve(model::Backend::cuda, 1, 16);
  EXPECT_EQ(unavailable.jobs, 2);
  EXPECT_FALSE(unavailable.mps);
  EXPECT_FALSE(resolve(model::Backend::host, 0, 16, {}, false, true).mps);
  EXPECT_TRUE(resolve(model::Backend::external, 1, 16, {.workers = 4}, false, true).mps);
  EXPECT_FALSE(resolve(model::Backend::external, 1, 16, {}, false, true).mps);
  EXPECT_FALSE(resolve(model::Backend::external, 0, 16, {.workers = 4}, false, true).mps);
  EXPECT_EQ(refusal(model::Backend::cuda, 1, {.mps = "yes"}),
            "--mps: expected auto, on or off, got 'yes'");
  EXPECT_EQ(refusal(model::Backend::host, 0, {.mps = "on"}, false, true),
            "--mps on: shares a GPU between the case workers of --backend cuda or --external on a "
            "GPU");
  EXPECT_EQ(refusal(model::Backend::cuda, 1, {.mps = "on"}),
            "--mps on: no MPS here (nvidia-cuda-mps-control is not on PATH and "
            "CUDA_MPS_PIPE_DIRECTORY is not set)");
  EXPECT_EQ(refusal(model::Backend::cuda, 1, {.mps = "on"}, true, true),
            "--mps on: shares a GPU between case workers; --no-isolate runs every case in this "
            "process");
}

TEST(ParallelOption, CudaDefaultsToEveryDeviceAndTwoWorkersEachUpToTheCores) {
  const Parallel two = resolve(model::Backend::cuda, 2, 16);
  EXPECT_TRUE(two.workers);
  EXPECT_EQ(two.jobs, 4);
  EXPECT_EQ(two.devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(resolve(model::Backend::cuda, 1, 16).jobs, 2);
  EXPECT_EQ(resolve(model::Backend::cuda, 1, 1).jobs, 1);
  EXPECT_EQ(resolve(model::Backend::cuda, 8, 4).jobs, 4);
  EXPECT_EQ(resolve(model::Backend::cuda, 8, 200).jobs, 16);
  EXPECT_EQ(resolve(model::Backend::cuda, 2, 16, {.jobs = 3}).jobs, 3);
  EXPECT_EQ(resolve(model::Backend::cuda, 4, 16, {.devices = "3,1"}).devices,
            (std::vector<int>{3, 1}));
}

TEST(ParallelOption, HostTakesEveryCoreAndExternalOneWorker) {
  EXPECT_EQ(resolve(model::Backend::host, 0, 6).jobs, 6);
  EXPECT_EQ(resolve(model::Backend::host, 0, 5000).jobs, 1024);
  EXPECT_TRUE(resolve(model::Backend::host, 0, 6).devices.empty());
  const Parallel one = resolve(model::Backend::external, 1, 16);
  EXPECT_EQ(one.jobs, 1);
  EXPECT_TRUE(one.devices.empty()); // one GPU: the adapter's own default is it
  const Parallel four = resolve(model::Backend::external, 4, 16, {.workers = 8});
  EXPECT_EQ(four.jobs, 8);
  EXPECT_EQ(four.devices, (std::vector<int>{0, 1, 2, 3}));
  // A build without CUDA cannot count: a list is taken as given.
  EXPECT_EQ(
      resolve(model::Backend::external, std::nullopt, 16, {.workers = 2, .devices = "0,5"}).devices,
      (std::vector<int>{0, 5}));
  const Parallel here = resolve(model::Backend::host, 0, 16, {}, true);
  EXPECT_FALSE(here.workers);
  EXPECT_EQ(here.jobs, 1);
}

TEST(ParallelOption, RefusalsAreOneLine) {
  EXPECT_EQ(refusal(model::Backend::cuda, 2, {.devices = "2"}),
            "--devices: no CUDA device 2 (this process sees 2: 0..1)");
  EXPECT_EQ(refusal(model::Backend::cuda, 0, {}), "--devices all: this process sees no CUDA device");
  EXPECT_EQ(refusal(model::Backend::cuda, 0, {.devices = "0"}),
            "--devices: no CUDA device 0 (this process sees 0)");
  EXPECT_EQ(refusal(model::Backend::external, std::nullopt, {.devices = "all"}),
            "--devices all: this build has no CUDA and cannot count the GPUs; list them "
            "(--devices 0,1)");
  EXPECT_EQ(refusal(model::Backend::cuda, 4, {.devices = "1,-1"}),
            "--devices: expected all or device indices like 0,1, got '1,-1'");
  EXPECT_EQ(refusal(model::Backend::cuda, 4, {.devices = "2,2"}),
            "--devices: device 2 is listed twice in '2,2'");
  EXPECT_EQ(refusal(model::Backend::cuda, 4, {.jobs = 0}), "--jobs: expected 1..1024, got 0");
  EXPECT_EQ(refusal(model::Backend::cuda, 4, {.workers = 2}),
            "--workers: starts adapter workers for --external; the host and cuda backends take "
            "--jobs N");
  EXPECT_EQ(refusal(model::Backend::external, 4, {.workers = 2000}),
            "--workers: expected 1..1024, got 2000");
  EXPECT_EQ(refusal(model::Backend::cuda, 4, {.devices = "0"}, true),
            "--devices: needs case workers; --no-isolate runs every case in this process");
}

TEST(ParallelOption, WorkerKGetsDeviceKModuloTheListThroughItsEnvironment) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  const Parallel p = resolve(model::Backend::cuda, 4, 16, {.jobs = 5, .devices = "2,0"});
  const fuzz::CaseWorkerStart start = case_worker_start(p, {{"name", "cuda"}});
  ASSERT_EQ(start.command.size(), 2u);
  EXPECT_EQ(start.command[1], "case-worker");
  EXPECT_EQ(start.setup.at("backend").at("name"), "cuda");
  ASSERT_EQ(start.environment.size(), 5u);
  const std::vector<std::string> devices{"2", "0", "2", "0", "2"};
  for (std::size_t k = 0; k < 5; ++k)
    EXPECT_EQ(start.environment[k],
              (std::vector<std::string>{"MC_CASE_WORKER=" + std::to_string(k),
                                        "CUDA_VISIBLE_DEVICES=" + devices[k]}));
  EXPECT_EQ(devices_line(p), "5 case workers on CUDA devices 2 (3), 0 (2)");
  // Under a CUDA_VISIBLE_DEVICES of this process's own, index k is its k-th entry.
  setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb,GPU-cc", 1);
  const fuzz::CaseWorkerStart narrowed = case_worker_start(
      resolve(model::Backend::cuda, 3, 16, {.jobs = 2, .devices = "2,1"}), {{"name", "cuda"}});
  EXPECT_EQ(narrowed.environment[0][1], "CUDA_VISIBLE_DEVICES=GPU-cc");
  EXPECT_EQ(narrowed.environment[1][1], "CUDA_VISIBLE_DEVICES=GPU-bb");
  unsetenv("CUDA_VISIBLE_DEVICES");
  // Unpinned workers get their slot only.
  const fuzz::CaseWorkerStart host = case_worker_start(resolve(model::Backend::host, 0, 2), {});
  EXPECT_EQ(host.environment,
            (std::vector<std::vector<std::string>>{{"MC_CASE_WORKER=0"}, {"MC_CASE_WORKER=1"}}));
  EXPECT_EQ(devices_line(resolve(model::Backend::host, 0, 2)), "");
  EXPECT_EQ(devices_line(resolve(model::Backend::cuda, 2, 16, {.jobs = 1})),
            "1 case worker on CUDA devices 0 (1)");
}

} // namespace
} // namespace mc::cli
