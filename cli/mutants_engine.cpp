// The runner mutants as `mambacheck mutants` jobs (fuzz_engine.h): the engine-level fuzz
// against one mutant until it is killed or its budget is spent.
#include "cli/fuzz_engine.h"

#include "fuzz/engine/engine_fuzz.h"
#include "gpu/engine/runner_mutant.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <optional>

namespace mc::cli {
namespace {

// Engine sizes for mutant runs: up to 60 reaches preemption followed by a prefix-hit resume.
constexpr int kEngineMutantSizeMax = 60;

fuzz::MutantOutcome run_engine_mutant(const fuzz::MutantRunOptions& m,
                                      gpu::engine::RunnerMutant runner_mutant,
                                      harness::SchedulerMutant scheduler_mutant,
                                      const gpu::MutantInfo& info) {
  fuzz::CampaignOptions o{.seed = m.seed,
                          .cases_max = m.cases_max > 0 ? m.cases_max : std::int64_t{1} << 40,
                          .seconds_max = m.seconds_max,
                          .max_size = std::min(m.max_size, kEngineMutantSizeMax),
                          .backend_name = m.backend_name.empty() ? "host" : m.backend_name,
                          .mutant = std::string(info.name),
                          .out_dir = m.out_dir / std::string(info.name),
                          .shrink = m.shrink};
  const fuzz::CampaignReport r = fuzz::run_engine_fuzz(
      o, {.run = {.executor = o.backend_name == "cuda" ? model::Backend::cuda : model::Backend::host,
                  .runner_mutant = runner_mutant,
                  .scheduler_mutant = scheduler_mutant}});
  fuzz::MutantOutcome out{.name = std::string(info.name),
                          .level = "engine",
                          .bug_class = info.bug_class,
                          .description = std::string(info.description),
                          .seconds = r.seconds,
                          .cases = r.cases,
                          .steps = r.total("steps")};
  const fuzz::Finding* finding = r.first_failing();
  if (finding == nullptr) return out;
  const fuzz::EngineCounterexample& cx =
      *finding->counterexample_as<fuzz::EngineCounterexample>();
  out.killed = true;
  out.seconds_to_kill = r.seconds_to_failure;
  out.cx_steps = cx.steps;
  out.cx_requests = cx.requests;
  out.cx_copies = -1;
  out.failure = cx.failure;
  out.counterexample = cx.shrunk_trace.generic_string();
  out.picture = cx.picture.generic_string();
  out.reproduce = cx.reproduce;
  return out;
}

} // namespace

fuzz::MutantJob runner_mutant_job(const gpu::MutantInfo& info) {
  MC_ASSERT(info.level != gpu::MutantLevel::kernel);
  gpu::engine::RunnerMutant runner = gpu::engine::RunnerMutant::none;
  harness::SchedulerMutant scheduler = harness::SchedulerMutant::none;
  if (info.level == gpu::MutantLevel::runner) {
    const std::optional<gpu::engine::RunnerMutant> found =
        gpu::engine::find_runner_mutant(info.name);
    MC_ASSERT(found.has_value());
    runner = *found;
  } else {
    const std::optional<harness::SchedulerMutant> found =
        harness::find_scheduler_mutant(info.name);
    MC_ASSERT(found.has_value());
    scheduler = *found;
  }
  return {.name = std::string(info.name),
          .level = "engine",
          .bug_class = info.bug_class,
          .description = std::string(info.description),
          .run = [runner, scheduler, info](const fuzz::MutantRunOptions& o) {
            return run_engine_mutant(o, runner, scheduler, info);
          }};
}

} // namespace mc::cli
