// `mambacheck export`: N generated launch cases with the oracle's expected results, as
// case directories (model/CASE_FORMAT.md), for kernels written elsewhere (Triton, PyTorch)
// and for `mambacheck case DIR --check`.
//
// Case i is generated from seed S + i at a size that cycles up to --max-size, so one export
// holds tiny cases (readable by hand), realistic state sizes, production-like grids and the
// edge cases of REFERENCE.md 5 (the generator's size classes, fuzz/gen_launch.h).
#include "cli/commands.h"
#include "cli/output_paths.h"
#include "cli/progress.h"
#include "fuzz/gen_launch.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/interrupt.h"
#include "model/launch_kinds.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <optional>

namespace mc::cli {
namespace {

inline constexpr std::int32_t kExportCasesMax = 1'000'000;

struct ExportOptions {
  std::int32_t cases = 100;
  std::uint64_t seed = 1;
  std::vector<std::string> kinds;
  int max_size = 100;
  std::string focus = "default";
  std::string out;
};

fuzz::GenOptions gen_options(const ExportOptions& options) {
  const std::optional<fuzz::GenOptions> preset = fuzz::gen_options_named(options.focus);
  if (!preset)
    model::fail_input("--focus: expected {}, got '{}'", fuzz::kGenFocusNames, options.focus);
  fuzz::GenOptions gen = *preset;
  if (options.kinds.empty()) return gen;
  gen.kinds.clear(); // --kinds replaces the preset's mix
  for (const std::string& k : options.kinds)
    gen.kinds.push_back(model::parse_launch_kind(k));
  return gen;
}

int run_export(const ExportOptions& options) {
  check_option_range("--cases", options.cases, 1, kExportCasesMax);
  check_option_range("--max-size", options.max_size, 0, 100);
  create_output_dir("--out", options.out);
  fuzz::GenOptions gen = gen_options(options);
  Progress progress("export", options.cases);
  std::int64_t unsupported = 0;
  std::int32_t i = 0;
  for (; i < options.cases; ++i) {
    if (model::interrupted()) break;
    // Sizes cycle 0..max_size so every export mixes tiny and large cases.
    gen.random_size = static_cast<int>(i % (options.max_size + 1));
    const fuzz::LaunchSpec spec =
        fuzz::random_launch_spec(options.seed + static_cast<std::uint64_t>(i), gen);
    const model::LaunchCase launch_case = fuzz::materialize(spec);
    const model::LaunchResult expected = oracle::run_launch(launch_case);
    unsupported += expected.status == model::LaunchStatus::unsupported;
    const std::filesystem::path dir =
        std::filesystem::path(options.out) / fmt::format("case-{:06d}", i);
    model::save_case(launch_case, dir);
    model::save_result(expected, dir);
    progress.tick(
        fmt::format("{} {}", model::to_string(spec.kind), fuzz::to_string(spec.size_class)));
  }
  progress.done();
  std::cout << fmt::format("exported {} cases (seed {}, {} unsupported by design) to {}\n", i,
                           options.seed, unsupported, options.out);
  if (model::interrupted()) {
    std::cout << fmt::format("export: interrupted by {}: cases 0..{} are complete\n",
                             model::signal_name(model::interrupt_signal()), i - 1);
    return 128 + model::interrupt_signal();
  }
  return kExitOk;
}

void add_export_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Write generated launch cases with the oracle's "
                                               "expected results as case directories");
  cmd->add_option("--cases", options->cases, "Number of cases (default 100)");
  cmd->add_option("--seed", options->seed, "First seed (case i uses seed + i; default 1)");
  std::string kinds_help = "Launch kinds to draw from (default all):";
  for (const model::LaunchKindInfo& info : model::kLaunchKinds)
    kinds_help += fmt::format(" {}", info.name);
  cmd->add_option("--kinds", options->kinds, kinds_help)->delimiter(',');
  cmd->add_option("--max-size", options->max_size, "Largest generator size, 0..100 (default 100)");
  cmd->add_option("--focus", options->focus,
                  fmt::format("Generator preset: {} (default: default)", fuzz::kGenFocusNames));
  cmd->add_option("--out", options->out, "Output directory")->required();
  cmd->callback([options, &action] { action = [options] { return run_export(*options); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_export_command);

} // namespace mc::cli
