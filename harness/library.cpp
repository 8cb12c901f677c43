#include "harness/library.h"

#include "gpu/engine/runner_mutant.h"
#include "gpu/mutant.h"
#include "harness/data_dir.h"
#include "harness/simulate.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <algorithm>

namespace mc::harness {
namespace {

std::vector<std::string> names(const nlohmann::json& s, const char* key,
                               const std::filesystem::path& trace) {
  std::vector<std::string> out;
  if (!s.contains(key)) return out;
  if (!s[key].is_array())
    model::fail_input("{}:1: source.scenario.{}: expected a list", trace.string(), key);
  for (const auto& n : s[key]) {
    if (!n.is_string())
      model::fail_input("{}:1: source.scenario.{}: expected names", trace.string(), key);
    out.push_back(n.get<std::string>());
  }
  return out;
}

// A name the catalogue does not hold is a misspelling: a scenario that names it would claim to
// guard a mutant that no replay ever runs.
std::vector<std::string> mutant_names(const nlohmann::json& s, const char* key,
                                      const std::filesystem::path& trace) {
  const bool kernel = std::string_view(key) == "kernel_mutants";
  std::vector<std::string> out = names(s, key, trace);
  for (const std::string& name : out)
    if (kernel ? !gpu::find_kernel_mutant(name) : !gpu::engine::find_runner_mutant(name))
      model::fail_input("{}:1: source.scenario.{}: '{}' is no {} of the catalogue (`mambacheck "
                        "mutants` lists them)",
                        trace.string(), key, name, kernel ? "kernel mutant" : "runner mutant");
  return out;
}

std::string text(const nlohmann::json& s, const char* key, const std::filesystem::path& trace) {
  if (!s.contains(key) || !s[key].is_string())
    model::fail_input("{}:1: source.scenario.{}: missing (a string)", trace.string(), key);
  return s[key].get<std::string>();
}

LibraryResult::MutantRun run_mutant(const ScenarioInfo& info, ReplayOptions options,
                                    std::string_view kind, const std::string& name) {
  LibraryResult::MutantRun run{.mutant = fmt::format("{}:{}", kind, name)};
  if (kind == "kernel") {
    const std::optional<gpu::Mutant> m = gpu::find_kernel_mutant(name);
    MC_ASSERT(m.has_value()); // read_scenario_info rejects other names
    options.kernel_mutant = *m;
  } else {
    const std::optional<gpu::engine::RunnerMutant> m = gpu::engine::find_runner_mutant(name);
    MC_ASSERT(m.has_value());
    options.runner_mutant = *m;
  }
  const ReplayResult r = replay_file(info.path, options);
  run.caught = !r.held();
  run.summary = r.summary();
  return run;
}

} // namespace

bool LibraryResult::passed() const {
  if (!skipped.empty()) return true;
  if (!clean.held()) return false;
  return std::all_of(mutants.begin(), mutants.end(), [](const MutantRun& m) { return m.caught; });
}

ScenarioInfo read_scenario_info(const std::filesystem::path& trace) {
  scenarios::TraceReader reader(trace); // reads the header only
  const nlohmann::json& source = reader.header().source;
  if (!source.is_object() || !source.contains("scenario") || !source["scenario"].is_object())
    model::fail_input("{}:1: source.scenario: missing (a library trace names what it guards)",
                      trace.string());
  const nlohmann::json& s = source["scenario"];
  ScenarioInfo info{.path = trace, .name = text(s, "name", trace)};
  const std::string bug_class = text(s, "bug_class", trace);
  if (bug_class.size() != 1 || ((bug_class[0] < 'A' || bug_class[0] > 'H') && bug_class[0] != 'X'))
    model::fail_input("{}:1: source.scenario.bug_class: '{}' is not one of A..H or X",
                      trace.string(), bug_class);
  info.bug_class = bug_class[0];
  info.guards = text(s, "guards", trace);
  info.kernel_mutants = mutant_names(s, "kernel_mutants", trace);
  info.runner_mutants = mutant_names(s, "runner_mutants", trace);
  if (s.contains("v1_copy_path")) {
    const std::string path = text(s, "v1_copy_path", trace);
    const std::optional<model::V1CopyPath> parsed = model::parse_v1_copy_path(path);
    if (!parsed)
      model::fail_input("{}:1: source.scenario.v1_copy_path: '{}' is not {}", trace.string(), path,
                        model::kV1CopyPathNames);
    info.v1_copy_path = *parsed;
  }
  return info;
}

std::vector<ScenarioInfo> list_library(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    model::fail_input("{}: not a directory (the scenario library)", dir.string());
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".jsonl")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<ScenarioInfo> out;
  for (const auto& f : files)
    out.push_back(read_scenario_info(f));
  return out;
}

LibraryResult run_scenario(const ScenarioInfo& info, const ReplayOptions& options) {
  ReplayOptions clean = options;
  clean.v1_copy_path = info.v1_copy_path.value_or(options.v1_copy_path);
  clean.kernel_mutant = gpu::Mutant::none;
  clean.runner_mutant = gpu::engine::RunnerMutant::none;
  if (clean.external != nullptr) {
    const scenarios::TraceReader reader(info.path); // the header only
    const model::CacheConfig& config = reader.header().config;
    model::RunnerOptions runner{.flavour = clean.runner.value_or(config.runner),
                                .v1_copy_path = clean.v1_copy_path,
                                .v2_table_rows = clean.v2_table_rows,
                                .deferred_postprocess = clean.deferred_postprocess};
    // The kernels' own V2 table convention, and V1's fused pre-copy in either launch shape
    // where the scenario names no copy path: the same bookkeeping, the launches they have.
    std::vector<model::RunnerOptions> tries{runner};
    if (runner.flavour == model::RunnerFlavour::v2) {
      tries.push_back(runner);
      tries.back().v2_table_rows = runner.v2_table_rows == model::V2TableRows::slot
                                       ? model::V2TableRows::batch_row
                                       : model::V2TableRows::slot;
    } else if (!info.v1_copy_path) {
      for (const model::V1CopyPath path : {model::V1CopyPath::precopy_v1, model::V1CopyPath::precopy}) {
        tries.push_back(runner);
        tries.back().v1_copy_path = path;
      }
    }
    const auto fits = std::ranges::find_if(tries, [&](const model::RunnerOptions& r) {
      return !uncovered_kind(clean.external, r, config.mode);
    });
    if (fits == tries.end())
      return {.info = info,
              .skipped = fmt::format("the external kernels do not cover {}",
                                     model::to_string(*uncovered_kind(clean.external, runner,
                                                                      config.mode)))};
    clean.v1_copy_path = fits->v1_copy_path;
    clean.v2_table_rows = fits->v2_table_rows;
    return {.info = info, .clean = replay_file(info.path, clean)};
  }
  LibraryResult result{.info = info, .clean = replay_file(info.path, clean)};
  for (const std::string& name : info.kernel_mutants)
    result.mutants.push_back(run_mutant(info, clean, "kernel", name));
  for (const std::string& name : info.runner_mutants)
    result.mutants.push_back(run_mutant(info, clean, "runner", name));
  return result;
}

std::vector<LibraryResult> run_library(const std::filesystem::path& dir,
                                       const ReplayOptions& options) {
  std::vector<LibraryResult> out;
  for (const ScenarioInfo& info : list_library(dir)) {
    LibraryResult r = run_scenario(info, options);
    // A scenario cut short by SIGINT or SIGTERM is no verdict: the results end before it.
    if (model::interrupted()) break;
    out.push_back(std::move(r));
  }
  return out;
}

std::filesystem::path default_library_dir() {
  return find_data_dir("scenarios/library", "scenario library (--library DIR names one)");
}

} // namespace mc::harness
