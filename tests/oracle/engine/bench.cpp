// oracle_engine_bench: the speed of the engine-level oracle (every invariant on), one core.
//
// Not a test (ctest does not run it): a rerunnable measurement. Each configuration runs
// run_engine for a fixed number of steps from a fixed seed and prints steps/s and
// request-steps/s in CPU time (getrusage, what a shared machine still measures fairly) and
// in wall time. Usage: oracle_engine_bench [repeats [filter]]: repeats 1..100 (default 3; the
// best time counts), filter a substring of the configuration names to run (default all).
#include "model/cpu_time.h"
#include "model/presets.h"
#include "oracle/engine/driver.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace {

using namespace mc;
using oracle::engine::EngineOptions;
using oracle::engine::EngineReport;

struct BenchCase {
  std::string name;
  model::CacheConfig config;
  model::LayoutSpec spec;
  EngineOptions options;
  std::int64_t steps = 0;
  std::int32_t requests = 0;
};

BenchCase tiny_case(model::RunnerFlavour flavour) {
  const model::Preset& preset = model::find_preset("tiny-mamba2");
  BenchCase bc{.name = fmt::format("tiny-mamba2 {}", model::to_string(flavour)),
               .config = preset.config,
               .spec = preset.spec,
               .steps = 40'000,
               .requests = 8'000};
  bc.config.runner = flavour;
  bc.spec.num_blocks = 64;
  bc.options.runner.flavour = flavour;
  return bc;
}

// mamba2-2.7b geometry (B = 256, 2.6 MB temporal state per layer) with 2 layers instead of
// 64 and a small pool, so that a run takes seconds.
BenchCase production_case(model::RunnerFlavour flavour) {
  const model::Preset& preset = model::find_preset("mamba2-2.7b");
  BenchCase bc{.name = fmt::format("mamba2-2.7b(2 layers) {}", model::to_string(flavour)),
               .config = preset.config,
               .spec = preset.spec,
               .steps = 300,
               .requests = 60};
  bc.config.runner = flavour;
  bc.spec.groups[0].num_layers = 2;
  bc.spec.num_blocks = 24;
  bc.options.runner.flavour = flavour;
  bc.options.scheduler.token_budget = 1024;
  bc.options.workload.prompt_len_max = 600;
  bc.options.workload.output_len_max = 40;
  return bc;
}

void run(const BenchCase& bc, int repeats) {
  double cpu_best = 1e300;
  double wall_best = 1e300;
  EngineReport report;
  for (int i = 0; i < repeats; ++i) {
    const double cpu0 = model::cpu_seconds().total();
    const auto wall0 = std::chrono::steady_clock::now();
    report = oracle::engine::run_engine(bc.config, bc.spec, bc.steps, bc.requests, 1, bc.options);
    const double cpu = model::cpu_seconds().total() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    cpu_best = std::min(cpu_best, cpu);
    wall_best = std::min(wall_best, wall);
  }
  const auto steps = static_cast<double>(report.steps);
  const auto request_steps = static_cast<double>(report.request_steps);
  fmt::print("{:<28} steps {:>7} req-steps {:>8} | cpu {:7.3f}s: {:>9.0f} steps/s {:>10.0f} "
             "req-steps/s | wall {:7.3f}s: {:>9.0f} steps/s {:>10.0f} req-steps/s{}\n",
             bc.name, report.steps, report.request_steps, cpu_best, steps / cpu_best,
             request_steps / cpu_best, wall_best, steps / wall_best, request_steps / wall_best,
             report.first_finding ? " FINDING: " + report.first_finding->message : "");
}

} // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  const std::string filter = argc > 2 ? argv[2] : "";
  if (repeats < 1 || repeats > 100 || argc > 3) {
    fmt::print(stderr, "usage: oracle_engine_bench [repeats 1..100 [name filter]]\n");
    return 2;
  }
  for (const BenchCase& bc :
       {tiny_case(model::RunnerFlavour::v1), tiny_case(model::RunnerFlavour::v2),
        production_case(model::RunnerFlavour::v1), production_case(model::RunnerFlavour::v2)})
    if (bc.name.find(filter) != std::string::npos) run(bc, repeats);
  return 0;
}
