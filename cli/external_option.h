// --external and --external-timeout as the engine-level commands declare them, and the one check
// of the timeout every command that takes one applies; the engine commands' --backend.
#pragma once

#include "backends/block_manager_worker.h"
#include "model/backend.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace mc::cli {

// `run` and `replay`: the launches on the kernels of a worker command.
void add_external_options(CLI::App& cmd, std::string& command, double& timeout_seconds);

// A timeout outside 0 < seconds <= 86400 is an InputError naming `option` (--external-timeout,
// --block-manager-timeout, --case-timeout).
void check_timeout_option(std::string_view option, double seconds);

// `run`, `fuzz --level engine`, `gate` and `bench --engine`: the KV cache calls on the manager
// of a worker command (backends/block_manager_worker.h; docs/block-manager.md).
void add_block_manager_options(CLI::App& cmd, std::string& command, double& timeout_seconds);
// --block-manager's worker, started once its timeout is checked; null without the option.
std::unique_ptr<backends::BlockManagerWorker> start_block_manager(const std::string& command,
                                                                  double timeout_seconds);

// `run`, `replay` and `show`: the executor --backend names, host or cuda (`what` follows "host
// or cuda" in the refusal of another name); EnvironmentError for cuda without a device.
model::Backend engine_executor(const std::string& backend, std::string_view what = "");

} // namespace mc::cli
