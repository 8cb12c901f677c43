// Inputs of the benchmark (bench/kernel_bench.h): a layout from a preset, sized to fit the GPU, and
// several input sets (block tables over disjoint blocks) rotated between timed runs, so
// neither L2 nor a repeated block pattern flatters a kernel.
#pragma once

#include "bench/kernel_bench.h"
#include "model/launch.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::gpu {

struct BenchCase {
  std::string name;
  model::Layout layout;
  std::int32_t num_reqs = 0;
  std::int32_t num_copying = 0; // rows that cross a block (the first ones)
  std::vector<model::BlockTables> sets;
  model::RequestArrays requests; // postprocess_align inputs (V2), identity idx_mapping
};

// Every copying row saves its running state to the next block column with bias 2
// (a = 3, new_num_computed = 2B: conv shifted by 2 tokens, temporal from column 2);
// the other rows decide and copy nothing. `crossing_max` caps the copying rows.
// Input sets: as many as it takes for the sets together to touch `cache_bytes` (read plus
// write; one set of a launch that alone touches that much), at most `sets_max`
// (1..kBenchSetsMax); a launch that copies nothing gets `sets_max`. The block count is then
// cut to fit `memory_budget_bytes`, first by fewer input sets, then fewer rows.
BenchCase make_bench_case(std::string name, const model::CacheConfig& config,
                          model::LayoutSpec spec, std::int32_t num_reqs, std::int32_t crossing_max,
                          std::int64_t memory_budget_bytes, std::int32_t sets_max = kBenchSetsMax,
                          std::int64_t cache_bytes = 0);

// The same copies as a V1 batch_copy case of input set `set` (for the flat copy list).
model::LaunchCase batch_copy_view(const BenchCase& bench, std::size_t set);

} // namespace mc::gpu
