// `mambacheck layout PRESET`: every state tensor of a preset with its shape,
// element strides, natural bytes per block, page stride and total bytes.
#include "cli/commands.h"
#include "cli/layout_report.h"
#include "model/presets.h"

#include <fmt/format.h>

#include <iostream>
#include <optional>

namespace mc::cli {
namespace {

struct LayoutOptions {
  std::string preset;
  std::optional<std::int32_t> tp_size;
  std::optional<std::int32_t> num_spec;
  std::optional<std::string> conv_layout;
  std::optional<std::int64_t> num_blocks;
  std::optional<std::int32_t> block_size;
  bool json = false;
};

int run_layout(const LayoutOptions& options) {
  const model::Preset& preset = model::find_preset(options.preset);
  model::CacheConfig config = preset.config;
  model::LayoutSpec spec = preset.spec;
  if (options.tp_size) config.tp_size = *options.tp_size;
  if (options.num_spec) {
    config.num_spec_tokens = *options.num_spec;
    config.num_spec_blocks = *options.num_spec;
  }
  if (options.conv_layout) config.conv_layout = model::parse_conv_layout(*options.conv_layout);
  if (options.block_size) config.mamba_block_size = *options.block_size;
  if (options.num_blocks) spec.num_blocks = *options.num_blocks;
  const model::Layout layout = model::build_layout(config, spec);
  std::cout << (options.json ? layout_json(preset.name, layout).dump(2) + "\n"
                             : layout_text(preset.name, layout));
  return kExitOk;
}

} // namespace

void add_layout_command(CLI::App& app, Action& action) {
  auto options = std::make_shared<LayoutOptions>();
  CLI::App* cmd = app.add_subcommand("layout", "Print a preset's state tensors, strides and bytes");
  cmd->add_option("preset", options->preset, "Preset name (see `mambacheck layout --list`)");
  cmd->add_flag_callback(
      "--list",
      [] {
        for (const model::Preset& p : model::all_presets())
          std::cout << fmt::format("{:<18} {}\n", p.name, p.description);
        throw CLI::Success();
      },
      "List the presets and exit");
  cmd->add_option("--tp", options->tp_size, "Tensor-parallel size (default 1)");
  cmd->add_option("--num-spec", options->num_spec, "Speculative tokens (and blocks)");
  cmd->add_option("--conv-layout", options->conv_layout, "Conv state layout: SD or DS");
  cmd->add_option("--blocks", options->num_blocks, "Physical blocks per state tensor");
  cmd->add_option("--block-size", options->block_size, "Mamba block size B (tokens per block)");
  cmd->add_flag("--json", options->json, "Machine-readable output");
  cmd->callback([options, &action] {
    if (options->preset.empty()) throw CLI::RequiredError("preset");
    action = [options] { return run_layout(*options); };
  });
}

MC_REGISTER_COMMAND(add_layout_command);

} // namespace mc::cli
