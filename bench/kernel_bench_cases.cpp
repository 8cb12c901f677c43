#include "bench/kernel_bench_cases.h"

#include "model/errors.h"

#include <algorithm>

namespace mc::gpu {
namespace {

constexpr std::int32_t kColumnsPerRow = 4; // running block, its successor, spec column, spare

std::int64_t bytes_per_block(const model::CacheConfig& config, model::LayoutSpec spec) {
  spec.num_blocks = 2;
  return model::build_layout(config, spec).total_bytes() / 2;
}

model::BlockTables make_set(const model::Layout& layout, std::int32_t num_reqs,
                            std::int32_t num_copying, std::int32_t set) {
  model::BlockTables tables;
  for (std::int32_t g = 0; g < layout.num_groups(); ++g) {
    model::BlockTable t = model::BlockTable::make(num_reqs, kColumnsPerRow, kColumnsPerRow);
    for (std::int32_t r = 0; r < num_reqs; ++r)
      for (std::int32_t c = 0; c < kColumnsPerRow; ++c)
        t.at(r, c) =
            r < num_copying && c < 3 ? 1 + 3 * (set * num_copying + r) + c : model::kNullBlockId;
    tables.groups.push_back(std::move(t));
  }
  return tables;
}

} // namespace

BenchCase make_bench_case(std::string name, const model::CacheConfig& config,
                          model::LayoutSpec spec, std::int32_t num_reqs, std::int32_t crossing_max,
                          std::int64_t memory_budget_bytes, std::int32_t sets_max,
                          std::int64_t cache_bytes) {
  const std::int64_t per_block = bytes_per_block(config, spec);
  const std::int64_t blocks_max = std::max<std::int64_t>(2, memory_budget_bytes / per_block);
  MC_ASSERT(sets_max >= 1 && sets_max <= kBenchSetsMax);
  std::int32_t copying = std::min(num_reqs, crossing_max);
  const std::int64_t touched = 2 * per_block * copying; // one launch, read and write
  const std::int64_t sets_needed =
      touched > 0 ? std::max<std::int64_t>(1, (cache_bytes + touched - 1) / touched) : sets_max;
  std::int32_t sets = static_cast<std::int32_t>(std::min<std::int64_t>(sets_max, sets_needed));
  while (sets > 1 && 1 + std::int64_t{3} * copying * sets > blocks_max)
    --sets;
  copying = static_cast<std::int32_t>(
      std::min<std::int64_t>(copying, (blocks_max - 1) / (3 * std::int64_t{sets})));
  spec.num_blocks = std::max<std::int64_t>(2, 1 + std::int64_t{3} * copying * sets);
  BenchCase bench{.name = std::move(name),
                  .layout = model::build_layout(config, spec),
                  .num_reqs = num_reqs,
                  .num_copying = copying};
  for (std::int32_t s = 0; s < sets; ++s)
    bench.sets.push_back(make_set(bench.layout, num_reqs, copying, s));
  const std::int32_t block_size = config.mamba_block_size;
  model::RequestArrays& r = bench.requests;
  for (std::int32_t i = 0; i < num_reqs; ++i) {
    const bool crosses = i < copying;
    r.idx_mapping.push_back(i);
    r.state_idx.push_back(0);
    r.num_accepted.push_back(crosses ? 3 : 1);
    r.new_num_computed.push_back(crosses ? 2 * block_size : 2 * block_size + 5);
  }
  return bench;
}

model::LaunchCase batch_copy_view(const BenchCase& bench, std::size_t set) {
  model::LaunchCase c;
  c.layout = bench.layout;
  c.kind = model::LaunchKind::batch_copy;
  c.num_reqs = c.num_slots = bench.num_reqs;
  c.block_tables = bench.sets[set];
  for (std::int32_t i = 0; i < bench.num_reqs; ++i) {
    c.requests.src_col.push_back(i < bench.num_copying ? 0 : -1);
    c.requests.state_idx.push_back(1);
    c.requests.token_bias.push_back(2);
  }
  return c;
}

} // namespace mc::gpu
