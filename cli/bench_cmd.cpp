// `mambacheck bench [--preset P...] [--requests N...] [--iters N] [--json FILE]`: CUDA-event
// timings of the kernels next to cudaMemcpyAsync and a batched memcpy (gpu/bench.h). Exit 3
// without CUDA or a device.
#include "cli/commands.h"
#include "gpu/bench.h"
#include "model/errors.h"
#include "model/presets.h"

#include <iostream>
#include <memory>

namespace mc::cli {
namespace {

constexpr std::int32_t kRequestsMax = 16384;
constexpr std::int32_t kItersMax = 100000;

int run_bench_command(const gpu::BenchOptions& options) {
  for (const std::string& p : options.presets)
    (void)model::find_preset(p); // exit 2 if unknown
  for (const std::int32_t n : options.requests)
    if (n <= 0 || n > kRequestsMax)
      model::fail_input("bench: --requests must be in 1..{}, got {}", kRequestsMax, n);
  if (options.iters <= 0 || options.iters > kItersMax)
    model::fail_input("bench: --iters must be in 1..{}, got {}", kItersMax, options.iters);
  return gpu::run_bench(options, std::cout);
}

} // namespace

void add_bench_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<gpu::BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Time the CUDA kernels against cudaMemcpyAsync");
  cmd->add_option("--preset", options->presets,
                  "Presets to time (default: mamba2-2.7b qwen3-next-80b nemotron-h-8b)");
  cmd->add_option("--requests", options->requests, "Batch sizes (default: 64 256)");
  cmd->add_option("--iters", options->iters, "Timed runs per measurement (median reported)");
  cmd->add_option("--json", options->json_path, "Write the results as JSON to FILE");
  cmd->callback([options, &action] { action = [options] { return run_bench_command(*options); }; });
}

MC_REGISTER_COMMAND(add_bench_command);

} // namespace mc::cli
