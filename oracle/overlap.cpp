// validate_no_overlap (validate.h): no two (request, tensor) copies of one launch may touch
// the same bytes where one of them writes (LAUNCH_KINDS.md, "Validity").
//
// Different tensors never share a byte (each owns its natural range of every page) and the
// blocks of one tensor are disjoint, so two copies can only meet in the same (tensor, block).
// Inside a block each access is one slice along the conv window: tokens [begin, end) (for
// DS the same token range of every dim row), or the whole block for a temporal state; two
// accesses overlap exactly when their slices intersect.
#include "model/errors.h"
#include "oracle/copy_plan.h"
#include "oracle/describe.h"
#include "oracle/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace mc::oracle {
namespace {

struct Access {
  std::int64_t order = 0; // position in decision order: the tie-break of the sort
  std::int32_t tensor = 0;
  std::int64_t block_id = 0;
  std::int32_t batch_row = 0;
  std::int64_t begin = 0; // conv: first token of the slice; temporal: 0
  std::int64_t end = 0;   // conv: one past the last token; temporal: 1 (the whole block)
  bool writes = false;
};

// Every access of every decision, grouped by (tensor, block) and, inside a group, in decision
// order (src before dst), so the first race reported does not depend on the sort.
std::vector<Access> collect_accesses(const model::Layout& layout,
                                     const std::vector<model::CopyDecision>& decisions) {
  std::vector<Access> accesses;
  accesses.reserve(2 * decisions.size());
  std::int64_t order = 0;
  const auto next = [&order] { return order++; };
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
    if (t.kind() == model::StateKind::temporal) {
      accesses.push_back({next(), d.tensor, d.src_block_id, d.batch_row, 0, 1, false});
      accesses.push_back({next(), d.tensor, d.dst_block_id, d.batch_row, 0, 1, true});
      continue;
    }
    const std::int64_t kept = conv_tokens_kept(t, d.token_bias);
    if (kept == 0) continue; // an empty slice touches nothing
    accesses.push_back(
        {next(), d.tensor, d.src_block_id, d.batch_row, d.token_bias, d.token_bias + kept, false});
    accesses.push_back({next(), d.tensor, d.dst_block_id, d.batch_row, 0, kept, true});
  }
  std::sort(accesses.begin(), accesses.end(), [](const Access& x, const Access& y) {
    return std::tie(x.tensor, x.block_id, x.order) < std::tie(y.tensor, y.block_id, y.order);
  });
  return accesses;
}

std::string describe_slice(const model::StateTensor& tensor, const Access& access) {
  if (tensor.kind() == model::StateKind::temporal) return "the whole block";
  return fmt::format("tokens [{}, {})", access.begin, access.end);
}

bool races(const Access& x, const Access& y) {
  return x.batch_row != y.batch_row && (x.writes || y.writes) && x.begin < y.end && y.begin < x.end;
}

[[noreturn]] void fail_race(const model::Layout& layout, const Access& x, const Access& y) {
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(x.tensor)];
  const Access& w = x.writes ? x : y;
  const Access& o = x.writes ? y : x;
  model::fail_input("launch: copies of request rows {} and {} race on {} block {}: row {} "
                    "writes {} while row {} {} {}",
                    x.batch_row, y.batch_row, describe_tensor(layout, x.tensor), x.block_id,
                    w.batch_row, describe_slice(t, w), o.batch_row, o.writes ? "writes" : "reads",
                    describe_slice(t, o));
}

} // namespace

void validate_no_overlap(const model::Layout& layout,
                         const std::vector<model::CopyDecision>& decisions) {
  const std::vector<Access> accesses = collect_accesses(layout, decisions);
  for (std::size_t first = 0; first < accesses.size();) {
    std::size_t last = first + 1; // [first, last): one (tensor, block)
    bool any_write = accesses[first].writes;
    while (last < accesses.size() && accesses[last].tensor == accesses[first].tensor &&
           accesses[last].block_id == accesses[first].block_id) {
      any_write = any_write || accesses[last].writes;
      ++last;
    }
    // Reads alone never race (many rows may read one prefix-cached block).
    for (std::size_t i = first; any_write && i < last; ++i)
      for (std::size_t j = i + 1; j < last; ++j)
        if (races(accesses[i], accesses[j])) fail_race(layout, accesses[i], accesses[j]);
    first = last;
  }
}

} // namespace mc::oracle
