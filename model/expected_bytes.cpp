// The host's form of a compare against expected bytes (expected_bytes.h).
#include "model/expected_bytes.h"

#include "model/errors.h"

namespace mc::model {

std::vector<std::int64_t> first_differences(const ExpectedStates& expected,
                                            std::span<const std::span<const std::byte>> bytes) {
  MC_ASSERT(bytes.size() == expected.ranges.size());
  const std::uint8_t* poison = poison_pattern_bytes();
  std::vector<std::int64_t> first(expected.ranges.size(), -1);
  for (std::size_t i = 0; i < expected.ranges.size(); ++i) {
    const ExpectedRange& r = expected.ranges[i];
    MC_ASSERT(static_cast<std::int64_t>(bytes[i].size()) == r.range.size_bytes);
    for (std::int64_t k = 0; k < r.range.size_bytes; ++k)
      if (static_cast<std::uint8_t>(bytes[i][static_cast<std::size_t>(k)]) !=
          expected_byte(r, expected.rows.data(), poison, k)) {
        first[i] = k;
        break;
      }
  }
  return first;
}

} // namespace mc::model
