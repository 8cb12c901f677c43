// What one step wrote and read, block by block, so the invariants can judge every access
// (DESIGN.md, invariants: nothing writes the null block, a freed block, a pad slot or
// another request's block).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mc::oracle::engine {

struct BlockAccess {
  std::int32_t batch_row = 0; // the request: the step's scheduled[batch_row]
  std::int32_t tensor = 0;
  std::int32_t group = 0;
  std::int32_t col = 0;
  std::int32_t block_id = 0;
  std::string_view origin; // "forward", "precopy", "batch_copy", "postprocess", ...
};

struct AccessLog {
  std::vector<BlockAccess> writes;
  std::vector<BlockAccess> copy_reads; // sources of copies (reads by the forward are checked)
  void clear() {
    writes.clear();
    copy_reads.clear();
  }
};

} // namespace mc::oracle::engine
