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

#include <map>
#include <string>
#include <utility>

namespace mc::oracle {
namespace {

struct Access {
  std::int32_t batch_row = 0;
  std::int64_t begin = 0; // conv: first token of the slice; temporal: 0
  std::int64_t end = 0;   // conv: one past the last token; temporal: 1 (the whole block)
  bool writes = false;
};

using TensorBlock = std::pair<std::int32_t, std::int64_t>; // (tensor, block id)

std::map<TensorBlock, std::vector<Access>>
collect_accesses(const model::Layout& layout, const std::vector<model::CopyDecision>& decisions) {
  std::map<TensorBlock, std::vector<Access>> accesses;
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
    const TensorBlock src{d.tensor, d.src_block_id};
    const TensorBlock dst{d.tensor, d.dst_block_id};
    if (t.kind() == model::StateKind::temporal) {
      accesses[src].push_back({d.batch_row, 0, 1, false});
      accesses[dst].push_back({d.batch_row, 0, 1, true});
      continue;
    }
    const std::int64_t kept = conv_tokens_kept(t, d.token_bias);
    if (kept == 0) continue; // an empty slice touches nothing
    accesses[src].push_back({d.batch_row, d.token_bias, d.token_bias + kept, false});
    accesses[dst].push_back({d.batch_row, 0, kept, true});
  }
  return accesses;
}

std::string describe_slice(const model::StateTensor& tensor, const Access& access) {
  if (tensor.kind() == model::StateKind::temporal) return "the whole block";
  return fmt::format("tokens [{}, {})", access.begin, access.end);
}

bool races(const Access& x, const Access& y) {
  return x.batch_row != y.batch_row && (x.writes || y.writes) && x.begin < y.end && y.begin < x.end;
}

} // namespace

void validate_no_overlap(const model::Layout& layout,
                         const std::vector<model::CopyDecision>& decisions) {
  for (const auto& [key, list] : collect_accesses(layout, decisions)) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(key.first)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        if (!races(list[i], list[j])) continue;
        const Access& w = list[i].writes ? list[i] : list[j];
        const Access& o = list[i].writes ? list[j] : list[i];
        model::fail_input("launch: copies of request rows {} and {} race on {} block {}: row {} "
                          "writes {} while row {} {} {}",
                          list[i].batch_row, list[j].batch_row, describe_tensor(layout, key.first),
                          key.second, w.batch_row, describe_slice(t, w), o.batch_row,
                          o.writes ? "writes" : "reads", describe_slice(t, o));
      }
    }
  }
}

} // namespace mc::oracle
