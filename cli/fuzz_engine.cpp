// `mambacheck fuzz --level engine`: see fuzz_engine.h.
#include "cli/fuzz_engine.h"

#include "cli/commands.h"
#include "cli/progress.h"
#include "fuzz/engine/engine_fuzz.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <iostream>

namespace mc::cli {
namespace {

inline constexpr std::int64_t kEngineCasesDefault = 200;
inline constexpr std::int64_t kEngineCasesMax = std::int64_t{1} << 40;

void resolve_mutant(const std::string& name, fuzz::EngineFuzzOptions& o) {
  if (name.empty() || name == "none") return;
  if (const gpu::MutantInfo* info = gpu::find_mutant(name)) {
    if (info->level == gpu::MutantLevel::runner) {
      o.runner_mutant = *gpu::engine::find_runner_mutant(name);
    } else {
      o.kernel_mutant = *gpu::find_kernel_mutant(name);
    }
    return;
  }
  model::fail_input("--mutant: no runner or kernel mutant named '{}' (see mambacheck mutants)",
                    name);
}

void print_summary(const fuzz::EngineFuzzOptions& o, const fuzz::EngineFuzzReport& r) {
  const double s = r.seconds > 0 ? r.seconds : 1e-9;
  std::cout << fmt::format("engine level, backend {}, seed {}: {} cases, {} steps in {:.1f} s "
                           "({:.1f} cases/s, {:.0f} steps/s), {:.1f} MiB of arenas compared\n",
                           o.backend_name, o.seed, r.cases, r.steps, r.seconds,
                           static_cast<double>(r.cases) / s, static_cast<double>(r.steps) / s,
                           static_cast<double>(r.bytes_compared) / (1 << 20));
  std::string presets, runners;
  for (const auto& [name, n] : r.cases_by_preset)
    presets += fmt::format(" {}={}", name, n);
  for (const auto& [name, n] : r.cases_by_runner)
    runners += fmt::format(" {}={}", name, n);
  std::cout << "  presets:" << presets << "\n  runners:" << runners << "\n";
}

void print_counterexample(const fuzz::EngineCounterexample& cx) {
  std::cout << fmt::format("MISMATCH (engine case seed {}, size {}): {}\n", cx.case_seed, cx.size,
                           cx.original_failure);
  std::cout << fmt::format("  shrunk to {} steps, {} requests ({} shrinks, {} candidates): {}\n",
                           cx.steps, cx.requests, cx.shrink_steps, cx.shrink_tried, cx.failure);
  std::cout << fmt::format("  case: {}\n", cx.description);
  if (!cx.dir.empty())
    std::cout << fmt::format("  counterexample: {} (before shrinking: {}), report {}\n",
                             cx.shrunk_trace.string(), cx.original_trace.string(),
                             (cx.dir / "report.txt").string());
  if (!cx.steps_view.empty())
    std::cout << fmt::format("  steps as the oracle saw them: {}\n", cx.steps_view.string());
  std::cout << fmt::format("  reproduce: {}\n", cx.reproduce);
  if (!cx.replay.empty()) std::cout << fmt::format("  replay the trace: {}\n", cx.replay);
}

} // namespace

EngineLevelResult run_engine_level(const EngineLevelRequest& q) {
  if (q.cases < 0 || q.cases > kEngineCasesMax) model::fail_input("--cases: got {}", q.cases);
  fuzz::EngineFuzzOptions o{.seed = q.seed, .max_size = q.max_size, .fixed = q.fixed};
  o.cases_max = q.cases > 0 ? q.cases : (q.seconds_max > 0 ? kEngineCasesMax : kEngineCasesDefault);
  o.seconds_max = q.seconds_max;
  o.executor = q.backend == backends::Backend::cuda ? gpu::engine::ExecutorKind::cuda
                                                    : gpu::engine::ExecutorKind::host;
  o.backend_name = std::string(to_string(q.backend));
  o.out_dir = q.out;
  resolve_mutant(q.mutant, o);
  Progress progress("fuzz engine", q.cases > 0 ? q.cases : 0);
  o.on_case = [&progress](std::int64_t, std::int64_t steps, const fuzz::EngineCase& c) {
    progress.tick(fmt::format("{} steps, {}", steps, c.preset));
  };
  const fuzz::EngineFuzzReport r = fuzz::run_engine_fuzz(o);
  progress.done();
  print_summary(o, r);
  EngineLevelResult result{.report = fuzz::to_json(o, r)};
  result.junit = JunitCase{.name = fmt::format("engine-{}-seed{}", o.backend_name, o.seed),
                           .seconds = r.seconds};
  if (r.counterexample) {
    print_counterexample(*r.counterexample);
    result.exit_code = kExitMismatch;
    result.junit.failed = true;
    result.junit.message = r.counterexample->failure;
    result.junit.details = fmt::format("{}\nreproduce: {}", r.counterexample->description,
                                       r.counterexample->reproduce);
  } else {
    std::cout << "engine level: all cases held\n";
  }
  return result;
}

} // namespace mc::cli
