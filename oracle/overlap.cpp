// validate_no_overlap (validate.h): no two (request, tensor) copies of one launch may touch
// the same bytes where one of them writes (LAUNCH_KINDS.md, "Validity").
//
// Different tensors never share a byte (each owns its natural range of every page) and the
// blocks of one tensor are disjoint, so two copies can only meet in the same (tensor, block).
// Inside a block each access is one slice along the conv window: tokens [begin, end) (for
// DS the same token range of every dim row), or the whole block for a temporal state; two
// accesses overlap exactly when their slices intersect.
#include "model/errors.h"
#include "model/stamps.h"
#include "oracle/copy_plan.h"
#include "oracle/describe.h"
#include "oracle/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace mc::oracle {
namespace {

struct Access {
  std::int32_t tensor = 0;
  std::int64_t block_id = 0;
  std::int32_t batch_row = 0;
  std::int64_t begin = 0; // conv: first token of the slice; temporal: 0
  std::int64_t end = 0;   // conv: one past the last token; temporal: 1 (the whole block)
  bool writes = false;
};

// Where an access sorts: its (tensor, block) packed into one word (tensor < 2^16 by kGroupsMax,
// kLayersMax and four states; block < kBlocksMax = 2^30), then its position in decision order.
// Sorting these 16-byte keys instead of the accesses themselves is what keeps the check cheap
// for the engine, which validates every launch of every step.
struct AccessKey {
  std::uint64_t tensor_block = 0;
  std::uint32_t order = 0; // index into the accesses, in decision order (src before dst)
  auto operator<=>(const AccessKey&) const = default;
};

std::uint64_t pack_tensor_block(std::int32_t tensor, std::int64_t block_id) {
  MC_ASSERT(tensor >= 0 && tensor < (1 << 16));
  MC_ASSERT(block_id >= 0 && block_id < model::kBlocksMax);
  return (static_cast<std::uint64_t>(tensor) << 30) | static_cast<std::uint64_t>(block_id);
}

// Calls `visit(access)` for every access of every decision, in decision order (src before dst).
template <typename Visit>
void for_each_access(const model::Layout& layout, const std::vector<model::CopyDecision>& decisions,
                     Visit&& visit) {
  for (const model::CopyDecision& d : decisions) {
    const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
    if (t.kind() == model::StateKind::temporal) {
      visit(Access{d.tensor, d.src_block_id, d.batch_row, 0, 1, false});
      visit(Access{d.tensor, d.dst_block_id, d.batch_row, 0, 1, true});
      continue;
    }
    const std::int64_t kept = conv_tokens_kept(t, d.token_bias);
    if (kept == 0) continue; // an empty slice touches nothing
    visit(Access{d.tensor, d.src_block_id, d.batch_row, d.token_bias, d.token_bias + kept, false});
    visit(Access{d.tensor, d.dst_block_id, d.batch_row, 0, kept, true});
  }
}

// Whether some (tensor, block) is touched by two request rows and written by one of them: the
// only way two accesses can race. One pass over an open-addressing table keyed by the packed
// (tensor, block), sized for the accesses (not for the pool); when it says yes, the exact
// check below finds the race, if the slices really meet, and reports the first one. The
// table's memory is kept from launch to launch (the engine validates every launch of every
// step; a fresh table each time cost more than the pass).
bool rows_meet_on_a_written_block(const model::Layout& layout,
                                  const std::vector<model::CopyDecision>& decisions) {
  struct Entry {
    std::uint64_t key_plus_one = 0; // 0: empty
    std::int32_t batch_row = 0;
    bool writes = false;
    bool rows_differ = false;
  };
  std::size_t capacity = 16;
  while (capacity < 4 * decisions.size()) // two accesses per decision at most, load <= 1/2
    capacity *= 2;
  thread_local std::vector<Entry> table;
  table.assign(capacity, Entry{});
  const std::size_t mask = capacity - 1;
  bool meet = false;
  for_each_access(layout, decisions, [&](const Access& a) {
    if (meet) return;
    const std::uint64_t key = pack_tensor_block(a.tensor, a.block_id) + 1;
    std::size_t i = static_cast<std::size_t>(model::mix64(key)) & mask;
    while (table[i].key_plus_one != 0 && table[i].key_plus_one != key)
      i = (i + 1) & mask;
    Entry& e = table[i];
    if (e.key_plus_one == 0) {
      e = {.key_plus_one = key, .batch_row = a.batch_row, .writes = a.writes};
      return;
    }
    e.writes = e.writes || a.writes;
    e.rows_differ = e.rows_differ || e.batch_row != a.batch_row;
    meet = e.writes && e.rows_differ;
  });
  return meet;
}

// The accesses grouped by (tensor, block) and, inside a group, in decision order, so the first
// race reported does not depend on the sort.
std::vector<AccessKey> sorted_keys(const std::vector<Access>& accesses) {
  MC_ASSERT(accesses.size() <= std::numeric_limits<std::uint32_t>::max());
  std::vector<AccessKey> keys;
  keys.reserve(accesses.size());
  for (std::size_t i = 0; i < accesses.size(); ++i)
    keys.push_back({pack_tensor_block(accesses[i].tensor, accesses[i].block_id),
                    static_cast<std::uint32_t>(i)});
  std::sort(keys.begin(), keys.end());
  return keys;
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
  if (!rows_meet_on_a_written_block(layout, decisions)) return; // the usual launch: no race
  std::vector<Access> accesses;
  accesses.reserve(2 * decisions.size());
  for_each_access(layout, decisions, [&accesses](const Access& a) { accesses.push_back(a); });
  const std::vector<AccessKey> keys = sorted_keys(accesses);
  for (std::size_t first = 0; first < keys.size();) {
    std::size_t last = first + 1; // [first, last): one (tensor, block)
    bool any_write = accesses[keys[first].order].writes;
    while (last < keys.size() && keys[last].tensor_block == keys[first].tensor_block) {
      any_write = any_write || accesses[keys[last].order].writes;
      ++last;
    }
    // Reads alone never race (many rows may read one prefix-cached block).
    for (std::size_t i = first; any_write && i < last; ++i)
      for (std::size_t j = i + 1; j < last; ++j) {
        const Access& x = accesses[keys[i].order];
        const Access& y = accesses[keys[j].order];
        if (races(x, y)) fail_race(layout, x, y);
      }
    first = last;
  }
}

} // namespace mc::oracle
