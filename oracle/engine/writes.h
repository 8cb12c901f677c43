// What one step wrote and read, block by block, so the invariants can judge every access
// (DESIGN.md, invariants: nothing writes the null block, a freed block, a pad slot or
// another request's block).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mc::oracle::engine {

struct BlockAccess {
  // The request: the step's scheduled[batch_row]; -1 for a block copy of the step, which no
  // row makes (model::Step::block_copies).
  std::int32_t batch_row = 0;
  std::int32_t tensor = 0;
  std::int32_t group = 0;
  std::int32_t col = 0;
  std::int32_t block_id = 0;
  std::string_view origin; // "forward", "precopy", "batch_copy", "postprocess", "block_copy"...
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
