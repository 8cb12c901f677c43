#include "fuzz/mutants/mutants.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace mc::fuzz {
namespace {

constexpr std::int64_t kCasesUnlimited = std::numeric_limits<std::int64_t>::max() / 2;

MutantOutcome outcome_of(const gpu::MutantInfo& info, std::string level) {
  return MutantOutcome{.name = std::string(info.name),
                       .level = std::move(level),
                       .bug_class = info.bug_class,
                       .description = std::string(info.description),
                       .racy = info.schedule == gpu::MutantSchedule::racy};
}

} // namespace

GenOptions mutant_gen_options() {
  GenOptions gen = GenOptions::host_default();
  gen.weights.big_offset = 10;
  return gen;
}

MutantOutcome run_kernel_mutant(const MutantRunOptions& options, gpu::Mutant mutant) {
  MC_ASSERT(mutant != gpu::Mutant::none);
  MC_ASSERT(options.backend != nullptr);
  MC_ASSERT(options.seconds_max > 0 || options.cases_max > 0);
  const auto index = static_cast<std::size_t>(mutant) - 1;
  MC_ASSERT(index < gpu::kernel_mutants().size());
  MutantOutcome out = outcome_of(gpu::kernel_mutants()[index], "kernel");

  CampaignOptions c;
  c.seed = options.seed;
  c.cases_max = options.cases_max > 0 ? options.cases_max : kCasesUnlimited;
  c.seconds_max = options.seconds_max;
  c.max_size = options.max_size;
  c.backend_name = options.backend_name;
  c.backend_args = fmt::format("--backend {}", options.backend_name);
  c.mutant = out.name;
  // A mutant that reads or writes out of bounds must be killed, not kill the run: on the host
  // backend each case runs in a forked child (on cuda its device fault is the kill).
  c.isolate = options.backend_name == "host";
  c.out_dir = options.out_dir / out.name;
  c.shrink = options.shrink;
  const CampaignReport r = run_kernel_campaign(
      c, {.gen = options.gen,
          .backend = [backend = options.backend, mutant](const model::LaunchCase& launch) {
            return backend(launch, mutant);
          }});

  out.cases = r.cases;
  out.steps = r.cases;
  out.seconds = r.seconds;
  const Finding* finding = r.first_failing();
  if (finding == nullptr) return out;
  const KernelCounterexample& cx = *finding->counterexample_as<KernelCounterexample>();
  out.killed = true;
  out.seconds_to_kill = r.seconds_to_failure;
  out.cx_steps = 1;
  out.cx_requests = cx.requests;
  out.cx_copies = cx.copies;
  out.failure = cx.failure;
  out.counterexample = cx.shrunk_dir.string();
  out.picture = cx.picture.string();
  out.reproduce = fmt::format("mambacheck fuzz --backend {} --mutant {} --seed {} --cases 1 "
                              "--max-size {}",
                              options.backend_name, out.name, cx.case_seed, options.max_size);
  return out;
}

MutantJob kernel_mutant_job(const gpu::MutantInfo& info) {
  MC_ASSERT(info.level == gpu::MutantLevel::kernel);
  const std::optional<gpu::Mutant> mutant = gpu::find_kernel_mutant(info.name);
  MC_ASSERT(mutant.has_value());
  return MutantJob{
      .name = std::string(info.name),
      .level = "kernel",
      .bug_class = info.bug_class,
      .description = std::string(info.description),
      .racy = info.schedule == gpu::MutantSchedule::racy,
      .run = [m = *mutant](const MutantRunOptions& o) { return run_kernel_mutant(o, m); },
      .memory_safe = info.memory_safe};
}

std::vector<MutantJob> kernel_mutant_jobs() {
  std::vector<MutantJob> jobs;
  for (const gpu::MutantInfo& info : gpu::kernel_mutants())
    jobs.push_back(kernel_mutant_job(info));
  return jobs;
}

std::vector<MutantJob> select_jobs(std::vector<MutantJob> jobs,
                                   const std::vector<std::string>& names) {
  if (names.empty()) return jobs;
  std::vector<MutantJob> kept;
  for (const std::string& name : names) {
    const auto it =
        std::find_if(jobs.begin(), jobs.end(), [&](const MutantJob& j) { return j.name == name; });
    if (it == jobs.end())
      model::fail_input("--only: no mutant named '{}' at the selected level(s)", name);
    kept.push_back(*it);
  }
  return kept;
}

bool survival_expected(const MutantOutcome& o, std::string_view backend_name) {
  return o.racy && backend_name != "host";
}

double median_seconds_to_kill(const std::vector<MutantOutcome>& outcomes) {
  std::vector<double> t;
  for (const MutantOutcome& o : outcomes)
    if (o.killed) t.push_back(o.seconds_to_kill);
  if (t.empty()) return 0.0;
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return n % 2 == 1 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

std::string format_table(const std::vector<MutantOutcome>& outcomes) {
  std::size_t width = 6;
  for (const MutantOutcome& o : outcomes)
    width = std::max(width, o.name.size());
  std::string out =
      fmt::format("{:<{}}  {:<6}  {:<5}  {:<8}  {:>9}  {:>7}  {:>17}\n", "mutant", width, "level",
                  "class", "result", "to kill", "cases", "shrunk (st/rq/cp)");
  std::int64_t killed = 0;
  std::int64_t racy_survivors = 0;
  for (const MutantOutcome& o : outcomes) {
    killed += o.killed ? 1 : 0;
    const std::string to_kill = o.killed ? fmt::format("{:.3f} s", o.seconds_to_kill) : "-";
    const std::string size =
        o.killed ? fmt::format("{}/{}/{}", o.cx_steps, o.cx_requests,
                               o.cx_copies < 0 ? std::string("-") : std::to_string(o.cx_copies))
                 : "-";
    const std::string_view result = o.killed ? "killed" : o.racy ? "survived*" : "SURVIVED";
    racy_survivors += !o.killed && o.racy ? 1 : 0;
    out += fmt::format("{:<{}}  {:<6}  {:<5}  {:<8}  {:>9}  {:>7}  {:>17}\n", o.name, width,
                       o.level, o.bug_class, result, to_kill, o.cases, size);
  }
  out += fmt::format("{} of {} killed; median time to kill {:.3f} s\n", killed, outcomes.size(),
                     median_seconds_to_kill(outcomes));
  if (racy_survivors > 0)
    out += "* racy mutant: whether a launch shows its race depends on how the CTAs are "
           "scheduled (gpu/mutant.h, MutantSchedule)\n";
  return out;
}

nlohmann::ordered_json to_json(const MutantRunOptions& options,
                               const std::vector<MutantOutcome>& outcomes, bool with_timings) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  std::int64_t killed = 0;
  for (const MutantOutcome& o : outcomes) {
    killed += o.killed ? 1 : 0;
    nlohmann::ordered_json j = {{"name", o.name},
                                {"level", o.level},
                                {"bug_class", std::string(1, o.bug_class)},
                                {"description", o.description},
                                {"schedule", o.racy ? "racy" : "deterministic"},
                                {"killed", o.killed}};
    if (o.killed) {
      j["cases_until_killed"] = o.cases;
      j["counterexample"] = {{"steps", o.cx_steps},      {"requests", o.cx_requests},
                             {"copies", o.cx_copies},    {"failure", o.failure},
                             {"path", o.counterexample}, {"reproduce", o.reproduce},
                             {"picture", o.picture}};
    }
    if (with_timings) {
      j["seconds_to_kill"] = o.seconds_to_kill;
      j["seconds"] = o.seconds;
    }
    list.push_back(std::move(j));
  }
  nlohmann::ordered_json j = {
      {"backend", options.backend_name},
      {"seed", options.seed},
      {"max_size", options.max_size},
      {"mutants", outcomes.size()},
      {"killed", killed},
      {"result", killed == static_cast<std::int64_t>(outcomes.size()) ? "all killed" : "survivors"},
      {"outcomes", std::move(list)}};
  if (with_timings) j["median_seconds_to_kill"] = median_seconds_to_kill(outcomes);
  return j;
}

} // namespace mc::fuzz
