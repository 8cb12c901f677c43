#include "model/config.h"

#include "model/errors.h"

namespace mc::model {

void validate(const CacheConfig& config) {
  if (config.mamba_block_size <= 0 || config.mamba_block_size > kBlockSizeMax)
    fail_input("config: mamba_block_size must be in 1..{}, got {}", kBlockSizeMax,
               config.mamba_block_size);
  if (config.attn_block_size <= 0 || config.attn_block_size > kBlockSizeMax)
    fail_input("config: attn_block_size must be in 1..{}, got {}", kBlockSizeMax,
               config.attn_block_size);
  if (config.num_spec_tokens < 0 || config.num_spec_tokens > kSpecTokensMax)
    fail_input("config: num_spec_tokens must be in 0..{}, got {}", kSpecTokensMax,
               config.num_spec_tokens);
  if (config.num_spec_blocks < 0 || config.num_spec_blocks > kSpecTokensMax)
    fail_input("config: num_spec_blocks must be in 0..{}, got {}", kSpecTokensMax,
               config.num_spec_blocks);
  if (config.mode == CacheMode::align && config.num_spec_blocks != config.num_spec_tokens)
    fail_input("config: align mode needs num_spec_blocks == num_spec_tokens, got {} and {}",
               config.num_spec_blocks, config.num_spec_tokens);
  if (config.tp_size <= 0 || config.tp_size > kTpSizeMax)
    fail_input("config: tp_size must be in 1..{}, got {}", kTpSizeMax, config.tp_size);
}

std::string_view to_string(CacheMode mode) {
  switch (mode) {
  case CacheMode::none: return "none";
  case CacheMode::align: return "align";
  case CacheMode::all: return "all";
  }
  return "?";
}

std::string_view to_string(ConvLayout layout) { return layout == ConvLayout::SD ? "SD" : "DS"; }

std::string_view to_string(RunnerFlavour runner) {
  return runner == RunnerFlavour::v1 ? "v1" : "v2";
}

CacheMode parse_cache_mode(std::string_view text) {
  if (text == "none") return CacheMode::none;
  if (text == "align") return CacheMode::align;
  if (text == "all") return CacheMode::all;
  fail_input("mode: expected none, align or all, got '{}'", text);
}

ConvLayout parse_conv_layout(std::string_view text) {
  if (text == "SD" || text == "sd") return ConvLayout::SD;
  if (text == "DS" || text == "ds") return ConvLayout::DS;
  fail_input("conv layout: expected SD or DS, got '{}'", text);
}

RunnerFlavour parse_runner(std::string_view text) {
  if (text == "v1" || text == "V1") return RunnerFlavour::v1;
  if (text == "v2" || text == "V2") return RunnerFlavour::v2;
  fail_input("runner: expected v1 or v2, got '{}'", text);
}

} // namespace mc::model
