// The cache configuration shared by every part of mambacheck (REFERENCE.md, notation).
//
// The mamba block size B is the number of tokens per state block. It is NOT the
// attention block size, which can be smaller; confusing the two is bug class A
// (#53142), so both are carried and named apart.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mc::model {

enum class CacheMode : std::uint8_t { none, align, all };
enum class ConvLayout : std::uint8_t { SD, DS }; // SD: (state_len, dim); DS: (dim, state_len)
enum class RunnerFlavour : std::uint8_t { v1, v2 };

struct CacheConfig {
  std::int32_t mamba_block_size = 16;     // B, tokens per state block
  std::int32_t attn_block_size = 16;      // attention block size (never a divisor for mamba)
  std::int32_t num_spec_tokens = 0;       // drafts per decode step
  std::int32_t num_spec_blocks = 0;       // nsb; equals num_spec_tokens in align mode
  CacheMode mode = CacheMode::align;
  ConvLayout conv_layout = ConvLayout::SD;
  RunnerFlavour runner = RunnerFlavour::v1;
  std::int32_t tp_size = 1;
};

// Limits on everything read from a user (STYLE.md: put a limit on everything).
inline constexpr std::int32_t kBlockSizeMax = 1 << 16;
inline constexpr std::int32_t kSpecTokensMax = 16;
inline constexpr std::int32_t kTpSizeMax = 1024;

// Throws InputError naming the first impossible field.
void validate(const CacheConfig& config);

std::string_view to_string(CacheMode mode);
std::string_view to_string(ConvLayout layout);
std::string_view to_string(RunnerFlavour runner);
// Parsers throw InputError naming the field and the accepted values.
CacheMode parse_cache_mode(std::string_view text);
ConvLayout parse_conv_layout(std::string_view text);
RunnerFlavour parse_runner(std::string_view text);

// Ceil division for non-negative numerators (as vLLM's cdiv).
constexpr std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// Python floor division (rounds toward negative infinity): (-1) // 4 == -1.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

} // namespace mc::model
