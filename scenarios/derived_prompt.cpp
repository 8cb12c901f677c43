// Derived prompts: the expansion of (prefix_id, prefix_len, suffix_id, prompt_len).
#include "scenarios/derived_prompt.h"

#include "model/errors.h"

namespace mc::scenarios {

std::vector<std::int32_t> derive_prompt(const DerivedPrompt& prompt, std::int32_t vocab_size) {
  MC_ASSERT(vocab_size >= 1);
  MC_ASSERT(prompt.prefix_len >= 0);
  MC_ASSERT(prompt.prefix_len <= prompt.prompt_len);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(prompt.prompt_len));
  for (std::int32_t i = 0; i < prompt.prompt_len; ++i) {
    const std::uint32_t stream = i < prompt.prefix_len ? prompt.prefix_id : prompt.suffix_id;
    tokens[static_cast<std::size_t>(i)] =
        derived_token(stream, static_cast<std::uint32_t>(i), vocab_size);
  }
  return tokens;
}

} // namespace mc::scenarios
