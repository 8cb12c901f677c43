// `mambacheck scenario FILE`: a scripted scenario (harness/scenario_file.h: preset, config,
// requests with prompt lengths, shared prefixes, arrivals and per-step acceptance, optional
// expectations) expanded by the oracle's scheduler into a trace, written to --out, then
// replayed on the oracle and a backend exactly as `mambacheck replay` does (same output, exit
// codes, --steps-out and --explain).
#include "cli/commands.h"
#include "cli/compare_option.h"
#include "cli/mutant_option.h"
#include "cli/replay_run.h"
#include "harness/scenario_file.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

namespace mc::cli {
namespace {

struct ScenarioCliOptions {
  std::string file;
  std::string out; // the trace; default mc-out/scenario-STEM.jsonl
  ReplayCliOptions replay;
};

int run_scenario(const ScenarioCliOptions& o) {
  const harness::ExpandedScenario s = harness::expand_scenario(o.file);
  const std::filesystem::path trace =
      o.out.empty()
          ? std::filesystem::path("mc-out") /
                fmt::format("scenario-{}.jsonl", std::filesystem::path(o.file).stem().string())
          : std::filesystem::path(o.out);
  if (trace.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(trace.parent_path(), ec);
    if (ec)
      model::fail_input("--out: cannot create '{}': {}", trace.parent_path().string(),
                        ec.message());
  }
  harness::write_scenario_trace(s, trace);
  fmt::print("scenario: {} -> {} ({} steps, {} expectations)\n", o.file, trace.string(),
             s.steps.size(), s.expectations);
  ReplayCliOptions replay = o.replay;
  replay.trace = trace.string();
  if (replay.v1_copy.empty()) replay.v1_copy = std::string(model::to_string(s.v1_copy_path));
  return replay_one(replay);
}

void add_scenario_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ScenarioCliOptions>();
  o->replay.v1_copy.clear(); // default: the scenario's
  CLI::App* cmd = app.add_subcommand(
      "scenario", "Expand a scripted scenario (JSON) into a trace and replay it");
  cmd->add_option("file", o->file, "The scenario file (docs/scenarios.md)")->required();
  cmd->add_option("--out", o->out, "Write the trace here (default mc-out/scenario-NAME.jsonl)");
  cmd->add_option("--backend", o->replay.backend, "host or cuda (default host)");
  cmd->add_option("--report", o->replay.report, "Write a JSON report");
  cmd->add_option("--junit", o->replay.junit, "Write JUnit XML");
  cmd->add_option("--layers", o->replay.layers,
                  "At most this many layers per group (default: the scenario's)");
  add_mutant_option(*cmd, o->replay.mutants, o->replay.kernel_mutant, o->replay.runner_mutant,
                    "Run the backend's kernels or runner as this mutant (repeatable: one of each)");
  cmd->add_option("--steps-out", o->replay.steps_out,
                  "Write what the oracle believes happened, one JSON line per step");
  cmd->add_option("--explain", o->replay.explain, "Print that step (its index) as a table");
  add_whole_compare_option(*cmd, o->replay.whole_compare_every);
  cmd->callback([o, &action] { action = [o] { return run_scenario(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_scenario_command);

} // namespace mc::cli
