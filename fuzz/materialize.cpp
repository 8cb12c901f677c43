// materialize(): a LaunchSpec made concrete (see gen_launch.h).
//
// Arenas are poisoned on the pages of referenced blocks and of their neighbours (a guard on each
// side), and nowhere else: the other pages stay unmapped, zero, and cost nothing to map, copy,
// compare or release. That keeps both halves of what poison is for:
// - an unwritten byte shows: every byte a launch may write lies in a block its tables
//   reference, which holds poison or seeded bytes before the launch, so a byte the backend
//   failed to write differs from the oracle's;
// - a stray write shows: off by one block it hits poison, anywhere else it touches a page that
//   is zero on the oracle's side (comparisons visit every page either side touched,
//   model/touched_pages.h). What it cannot show is a stray write of zero bytes two blocks or
//   more away from any referenced block.
// Then the natural bytes of every (tensor, referenced block) get SplitMix64 bytes seeded by
// (fill_seed, tensor, block): independent of visiting order, so the same spec gives the same
// bytes.
#include "fuzz/gen_launch.h"

#include "model/errors.h"
#include "model/prng.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace mc::fuzz {
namespace {

// Block ids a group's table references (inside the row widths and the pool).
std::set<std::int64_t> referenced_blocks(const model::BlockTable& table, std::int64_t num_blocks) {
  std::set<std::int64_t> ids;
  for (std::int32_t r = 0; r < table.num_rows; ++r)
    for (std::int32_t c = 0; c < table.row_width; ++c) {
      const std::int32_t id = table.at(r, c);
      if (id >= 0 && id < num_blocks) ids.insert(id);
    }
  return ids;
}

void poison_around(model::Arena& arena, const model::ArenaSpec& spec,
                   const std::set<std::int64_t>& ids) {
  for (const std::int64_t id : ids) {
    const std::int64_t first = std::max<std::int64_t>(id - 1, 0);
    const std::int64_t last = std::min(id + 1, spec.num_blocks - 1);
    arena.poison_range(first * spec.page_bytes, (last - first + 1) * spec.page_bytes);
  }
}

void fill_block(model::Arena& arena, std::int64_t offset, std::int64_t bytes, std::uint64_t seed) {
  model::SplitMix64 rng{seed};
  std::byte* p = arena.data() + offset;
  for (std::int64_t i = 0; i < bytes; i += 8) {
    const std::uint64_t word = rng.next();
    for (std::int64_t j = 0; j < 8 && i + j < bytes; ++j)
      p[i + j] = static_cast<std::byte>(word >> (8 * j));
  }
}

} // namespace

model::LaunchCase materialize(const LaunchSpec& spec, MaterializeTimes* times) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  model::LaunchCase c;
  c.layout = model::build_layout(spec.config, spec.layout_spec);
  c.kind = spec.kind;
  c.num_reqs = spec.num_reqs;
  c.num_slots = spec.num_slots;
  c.block_tables = spec.block_tables;
  c.requests = spec.requests;
  MC_ASSERT(static_cast<std::int32_t>(spec.block_tables.groups.size()) == c.layout.num_groups());

  std::vector<std::set<std::int64_t>> referenced;
  for (const model::BlockTable& t : spec.block_tables.groups)
    referenced.push_back(referenced_blocks(t, spec.layout_spec.num_blocks));
  for (const model::ArenaSpec& a : c.layout.arenas)
    c.arenas.emplace_back(a.size_bytes());
  // Every tensor of one arena belongs to one group: the arena's referenced blocks are its
  // group's.
  std::vector<bool> poisoned(c.arenas.size(), false);
  for (const model::StateTensor& t : c.layout.tensors) {
    const auto arena = static_cast<std::size_t>(t.arena);
    if (poisoned[arena]) continue;
    poison_around(c.arenas[arena], c.layout.arenas[arena],
                  referenced[static_cast<std::size_t>(t.group)]);
    poisoned[arena] = true;
  }
  const Clock::time_point poisoned_at = Clock::now();
  for (std::size_t ti = 0; ti < c.layout.tensors.size(); ++ti) {
    const model::StateTensor& t = c.layout.tensors[ti];
    for (const std::int64_t id : referenced[static_cast<std::size_t>(t.group)])
      fill_block(c.arenas[static_cast<std::size_t>(t.arena)], t.block_offset_bytes(id),
                 t.natural_bytes,
                 model::mix_seed(spec.fill_seed, ti, static_cast<std::uint64_t>(id)));
  }
  if (times != nullptr) {
    times->arenas_seconds += std::chrono::duration<double>(poisoned_at - start).count();
    times->fill_seconds += std::chrono::duration<double>(Clock::now() - poisoned_at).count();
  }
  return c;
}

} // namespace mc::fuzz
