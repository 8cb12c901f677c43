#include "cli/external_option.h"

#include "gpu/cuda_backend.h"
#include "model/errors.h"

namespace mc::cli {

void add_external_options(CLI::App& cmd, std::string& command, double& timeout_seconds) {
  cmd.add_option("--external", command,
                 "Run the launches on the kernels of this worker command (the adapter's "
                 "worker, as `fuzz --external` takes it; docs/adapter.md)");
  cmd.add_option("--external-timeout", timeout_seconds,
                 "--external: seconds a launch may take before the worker counts as hung "
                 "(default 300)");
}

void check_timeout_option(std::string_view option, double seconds) {
  if (!(seconds > 0 && seconds <= 86400))
    model::fail_input("{}: expected 0 < seconds <= 86400, got {}", option, seconds);
}

void add_block_manager_options(CLI::App& cmd, std::string& command, double& timeout_seconds) {
  cmd.add_option("--block-manager", command,
                 "Make every KV cache manager call on the manager of this worker command, e.g. "
                 "'python3 -m mambacheck_adapter.block_manager --manager reference' "
                 "(docs/block-manager.md)");
  cmd.add_option("--block-manager-timeout", timeout_seconds,
                 "--block-manager: seconds one call may take before the manager counts as hung "
                 "(default 60)");
}

std::unique_ptr<backends::BlockManagerWorker> start_block_manager(const std::string& command,
                                                                  double timeout_seconds) {
  if (command.empty()) return nullptr;
  check_timeout_option("--block-manager-timeout", timeout_seconds);
  return std::make_unique<backends::BlockManagerWorker>(
      backends::BlockManagerOptions{.command = command, .timeout_seconds = timeout_seconds});
}

model::Backend engine_executor(const std::string& backend, std::string_view what) {
  if (backend == "host") return model::Backend::host;
  if (backend != "cuda")
    model::fail_input("--backend: expected host or cuda{}, got '{}'", what, backend);
  if (!gpu::cuda_available()) throw model::EnvironmentError("--backend cuda: no CUDA device");
  return model::Backend::cuda;
}

} // namespace mc::cli
