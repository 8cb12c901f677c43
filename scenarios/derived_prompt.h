// Prompts derived from small integers, so a trace can say "a 4000-token prompt of prefix
// family 7" instead of listing 4000 ids (FORMAT.md, "Derived prompts").
//
// Token i of stream s is splitmix64((s << 32) | i) mod vocab_size. A derived prompt takes
// its first prefix_len tokens from stream prefix_id and the rest from stream suffix_id, so
// requests that share a prefix_id share their first tokens (prefix hits, REFERENCE.md 3) and
// differ after. The recorder's Python copy (adapters/python/mambacheck_recorder.py) must agree
// with this bit for bit; both are tested against the values listed in FORMAT.md.
#pragma once

#include "model/prng.h"

#include <cstdint>
#include <vector>

namespace mc::scenarios {

inline constexpr std::int32_t kDerivedVocabSizeDefault = 32768;

struct DerivedPrompt {
  std::uint32_t prefix_id = 0;
  std::int32_t prefix_len = 0; // tokens from the prefix stream (<= prompt_len)
  std::uint32_t suffix_id = 0; // stream of tokens prefix_len .. prompt_len - 1
  std::int32_t prompt_len = 0;
};

// Token `position` of stream `stream_id`, in 0..vocab_size-1.
constexpr std::int32_t derived_token(std::uint32_t stream_id, std::uint32_t position,
                                     std::int32_t vocab_size) {
  const std::uint64_t key = (std::uint64_t{stream_id} << 32) | position;
  return static_cast<std::int32_t>(model::splitmix64(key) % static_cast<std::uint64_t>(vocab_size));
}

// The prompt's token ids; asserts 0 <= prefix_len <= prompt_len and vocab_size >= 1.
std::vector<std::int32_t> derive_prompt(const DerivedPrompt& prompt, std::int32_t vocab_size);

} // namespace mc::scenarios
