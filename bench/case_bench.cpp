#include "bench/case_bench.h"

#include "fuzz/campaign/kernel_campaign.h"
#include "model/cpu_time.h"
#include "model/errors.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace mc::bench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point& mark) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - mark).count();
  mark = now;
  return seconds;
}

// One case, as judge_case runs it, each phase timed.
void run_one(const rc::Gen<fuzz::LaunchSpec>& gen, const CaseBenchOptions& o, std::int64_t index,
             CaseBenchResult& r) {
  CasePhases& p = r.phases;
  Clock::time_point mark = Clock::now();
  const fuzz::LaunchSpec spec = gen(rc::Random(o.seed + static_cast<std::uint64_t>(index)),
                                    static_cast<int>(index % (o.max_size + 1)))
                                    .value();
  p.draw += since(mark);
  fuzz::CaseVerdict verdict;
  {
    fuzz::MaterializeTimes m;
    const model::LaunchCase launch = fuzz::materialize(spec, &m);
    p.arenas += m.arenas_seconds;
    p.fill += m.fill_seconds;
    mark = Clock::now();
    fuzz::CaseOutcome outcome;
    try {
      outcome.oracle = oracle::run_launch(launch);
    } catch (const model::InputError& e) {
      outcome.status = fuzz::CaseStatus::oracle_rejected;
      outcome.error = e.what();
    }
    p.oracle += since(mark);
    if (outcome.status != fuzz::CaseStatus::oracle_rejected) {
      try {
        outcome.backend = o.backend(launch);
      } catch (const std::exception& e) {
        outcome.status = fuzz::CaseStatus::backend_failed;
        outcome.error = e.what();
      }
      p.backend += since(mark);
      if (outcome.status == fuzz::CaseStatus::held) {
        outcome.difference = fuzz::compare_results(launch, outcome.oracle, outcome.backend);
        if (outcome.difference) outcome.status = fuzz::CaseStatus::mismatch;
      }
      p.compare += since(mark);
    }
    verdict = fuzz::verdict_of(launch, outcome);
    p.verdict += since(mark);
    r.arena_bytes += verdict.arena_bytes;
    mark = Clock::now(); // the case, its results and their arenas go at the end of this scope
  }
  p.release += since(mark);
  const fuzz::CaseVerdict back =
      fuzz::verdict_from_json(nlohmann::json::parse(fuzz::to_json(verdict).dump()));
  p.ipc += since(mark);
  if (back.failure) ++r.failed;
  ++r.cases;
}

std::vector<std::pair<const char*, double>> phase_list(const CasePhases& p) {
  return {{"draw the spec", p.draw},
          {"layout, arenas mapped and poisoned", p.arenas},
          {"fill referenced blocks", p.fill},
          {"oracle", p.oracle},
          {"backend", p.backend},
          {"compare", p.compare},
          {"verdict (signature, coverage)", p.verdict},
          {"release the case's memory", p.release},
          {"verdict to JSON and back (IPC)", p.ipc}};
}

} // namespace

CaseBenchResult run_case_bench(const CaseBenchOptions& o) {
  MC_ASSERT(o.backend != nullptr && o.cases >= 1);
  const rc::Gen<fuzz::LaunchSpec> gen = fuzz::gen_launch_spec(o.gen);
  CaseBenchResult r;
  const model::CpuSeconds before = model::cpu_seconds();
  const Clock::time_point start = Clock::now();
  for (std::int64_t i = 0; i < o.cases; ++i)
    run_one(gen, o, i, r);
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const model::CpuSeconds after = model::cpu_seconds();
  r.user_seconds = after.user - before.user;
  r.system_seconds = after.system - before.system;
  return r;
}

std::string describe(const CaseBenchOptions& o, const CaseBenchResult& r) {
  const double wall = std::max(r.wall_seconds, 1e-9);
  const double n = static_cast<double>(r.cases);
  std::string out = fmt::format(
      "{} kernel cases (seed {}, sizes 0..{}, backend {}): {:.2f} s ({:.0f} cases/s), {:.2f} s "
      "user + {:.2f} s system CPU, {:.1f} MiB of arenas per case\n",
      r.cases, o.seed, o.max_size, o.backend_name, r.wall_seconds, n / wall, r.user_seconds,
      r.system_seconds, static_cast<double>(r.arena_bytes) / n / (1 << 20));
  for (const auto& [name, seconds] : phase_list(r.phases))
    out += fmt::format("  {:<36} {:8.3f} s {:9.1f} us/case {:5.1f} %\n", name, seconds,
                       seconds / n * 1e6, 100 * seconds / wall);
  if (r.failed > 0) out += fmt::format("  ({} cases failed)\n", r.failed);
  return out;
}

nlohmann::json to_json(const CaseBenchOptions& o, const CaseBenchResult& r) {
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, seconds] : phase_list(r.phases))
    phases[name] = seconds;
  return {{"seed", o.seed},
          {"max_size", o.max_size},
          {"backend", o.backend_name},
          {"cases", r.cases},
          {"failed", r.failed},
          {"arena_bytes", r.arena_bytes},
          {"wall_seconds", r.wall_seconds},
          {"user_seconds", r.user_seconds},
          {"system_seconds", r.system_seconds},
          {"phase_seconds", phases}};
}

} // namespace mc::bench
