// `mambacheck case-worker --parent PID`: one of the case workers a fuzz campaign starts
// (fuzz/case_workers.h), never run by hand (hidden from --help). It reads the campaign's setup,
// makes its backend (host or cuda kernels, a kernel mutant's, or an external adapter worker of
// its own), then runs the cases it is given until its input ends.
// - cuda: the process sees one GPU, the one the campaign gave it (CUDA_VISIBLE_DEVICES). A
//   fault that leaves its CUDA context unusable ends it after the case; the campaign starts
//   another.
// - --external: its own adapter worker, started from the campaign's command with this process's
//   environment (the GPU the campaign gave it), its case files and log under
//   OUT/external/worker-K (K: MC_CASE_WORKER); at the engine level the adapter serves the
//   engine protocol (backends/external_engine.h), its log engine-worker.log there. An adapter that cannot be started or used is
//   exit 3 of the whole campaign, as it is for the campaign's own adapter.
#include "backends/backend.h"
#include "backends/block_manager_worker.h"
#include "backends/external_backend.h"
#include "backends/external_engine.h"
#include "backends/mutant_backend.h"
#include "cli/commands.h"
#include "cli/external_option.h"
#include "fuzz/campaign/kernel_campaign.h"
#include "fuzz/case_workers.h"
#include "fuzz/engine/engine_fuzz.h"
#include "gpu/cuda_backend.h"
#include "model/errors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>

namespace mc::cli {
namespace {

namespace fs = std::filesystem;

// This worker's directory for its adapter's case files and log: OUT/external/worker-K.
fs::path worker_dir(const nlohmann::json& backend) {
  const char* slot = std::getenv("MC_CASE_WORKER");
  const fs::path dir = fs::path(backend.at("dir").get<std::string>()) /
                       fmt::format("worker-{}", slot != nullptr ? slot : "0");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw fuzz::CaseWorkerFatal{fmt::format("cannot create {}: {}", dir.string(), ec.message())};
  return dir;
}

// What `start` returns; an adapter worker that cannot be started or used ends this case worker.
template <class Start> auto fatal_on_failure(Start start) {
  try {
    return start();
  } catch (const backends::ExternalWorkerFailure& failure) {
    throw fuzz::CaseWorkerFatal{failure.message};
  }
}

// The worker's backend as the campaign described it under setup["backend"].
fuzz::LaunchRunner make_runner(const nlohmann::json& backend,
                               std::unique_ptr<backends::ExternalWorker>& external) {
  const std::string name = backend.at("name").get<std::string>();
  if (name != "external")
    return backends::kernel_runner(
        backends::parse_backend(name),
        backends::parse_kernel_mutant(backend.value("mutant", std::string("none"))));
  const fs::path dir = worker_dir(backend);
  external = fatal_on_failure([&] {
    return backends::start_worker_in(backend.at("command").get<std::string>(), dir,
                                     backend.at("timeout").get<double>());
  });
  return [w = external.get()](const model::LaunchCase& launch) {
    return fatal_on_failure([&] { return w->run(launch); });
  };
}

// The engine level's adapter of this worker, where the campaign's backend is external.
std::unique_ptr<backends::ExternalEngineSource>
make_engine_source(const nlohmann::json& backend) {
  if (backend.at("name") != "external") return nullptr;
  const fs::path dir = worker_dir(backend);
  return fatal_on_failure([&] {
    return backends::start_external_engine(backend.at("command").get<std::string>(),
                                           backend.at("timeout").get<double>(),
                                           dir / "engine-worker.log");
  });
}

// The engine level's block manager of this worker, where the campaign has one.
std::unique_ptr<backends::BlockManagerWorker> make_block_manager(const nlohmann::json& setup) {
  const nlohmann::json& run = setup.at("options").at("run");
  try {
    return start_block_manager(run.value("block_manager", ""),
                               run.value("block_manager_timeout", 60.0));
  } catch (const model::EnvironmentError& e) {
    throw fuzz::CaseWorkerFatal{e.what()};
  }
}

int run_case_worker(std::int64_t parent) {
  std::unique_ptr<backends::ExternalWorker> external; // --external: this worker's adapter
  std::unique_ptr<backends::ExternalEngineSource> engine_source; // the same, engine level
  std::unique_ptr<backends::BlockManagerWorker> manager; // --block-manager: this worker's own
  return fuzz::serve_case_worker(static_cast<pid_t>(parent), [&](const nlohmann::json& setup) {
    const nlohmann::json& backend = setup.at("backend");
    fuzz::CaseWorkerJob job;
    if (setup.at("level") == "engine") {
      engine_source = make_engine_source(backend);
      manager = make_block_manager(setup);
      job = fuzz::engine_case_job(setup, engine_source.get(), manager.get());
    } else {
      job = fuzz::kernel_case_job(setup, make_runner(backend, external));
    }
    // A device fault leaves this process's CUDA context unusable: a fresh worker takes over.
    if (backend.at("name") == "cuda") job.must_retire = [] { return !gpu::cuda_context_usable(); };
    return job;
  });
}

void add_case_worker_command(CLI::App& app, Action& action) {
  auto parent = std::make_shared<std::int64_t>(0);
  CLI::App* cmd = app.add_subcommand("case-worker", "Run the cases a fuzz campaign gives it");
  cmd->group(""); // started by campaigns only: not listed in --help
  cmd->add_option("--parent", *parent, "The campaign's process id")->required();
  cmd->callback([parent, &action] { action = [parent] { return run_case_worker(*parent); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_case_worker_command);

} // namespace mc::cli
