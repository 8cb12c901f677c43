// State layouts: where every state tensor of every layer lives in memory.
//
// A layout is a list of mamba groups (each with its own block table, family and
// layer count; all share B, nsb and the mode). Every (group, layer, state) is one
// state tensor [num_blocks, ...dims]. States live in arenas of num_blocks pages:
// - PagePolicy::shared: the states of one layer share one page, each at its own
//   offset, like vLLM's as_strided views of one raw buffer; the block stride of
//   each state is the page size, larger than its natural size.
// - PagePolicy::separate: every state has its own arena; the block stride is the
//   natural size rounded up to page_align_bytes.
// A copy moves natural bytes, never the page stride (REFERENCE.md 1, class D).
#pragma once

#include "model/config.h"
#include "model/shapes.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mc::model {

enum class PagePolicy : std::uint8_t { separate, shared };

std::string_view to_string(PagePolicy policy);
PagePolicy parse_page_policy(std::string_view text); // throws InputError

struct GroupSpec {
  std::string name;
  Family family = Family::mamba2;
  FamilyParams params;
  std::int32_t num_layers = 1;
  std::int32_t conv_elem_size = 2;     // bytes per conv element: 2, 4 or 8
  std::int32_t temporal_elem_size = 4; // bytes per temporal element: 2, 4 or 8
  PagePolicy page_policy = PagePolicy::shared;
  std::int64_t page_align_bytes = 1;   // page (or separate stride) rounded up to this
};

struct LayoutSpec {
  std::vector<GroupSpec> groups;
  std::int64_t num_blocks = 64; // physical blocks per state tensor, block 0 is the null block
};

// One state tensor of one layer of one group.
struct StateTensor {
  std::int32_t group = 0;
  std::int32_t layer = 0; // within its group
  std::int32_t state = 0; // within the layer's tuple
  StateShape shape;
  ConvLayout conv_layout = ConvLayout::SD;
  std::int32_t elem_size = 0;
  std::int64_t natural_bytes = 0;      // prod(dims) * elem_size
  std::int32_t arena = 0;              // index into Layout::arenas
  std::int64_t offset_bytes = 0;       // offset of block 0 within the arena
  std::int64_t block_stride_bytes = 0; // bytes between consecutive blocks (page stride)

  StateKind kind() const { return shape.kind; }
  // Byte offset of block `block_id` of this state within its arena; 64-bit (class B).
  std::int64_t block_offset_bytes(std::int64_t block_id) const {
    return offset_bytes + block_id * block_stride_bytes;
  }
};

struct ArenaSpec {
  std::int64_t page_bytes = 0;
  std::int64_t num_blocks = 0;
  std::int64_t size_bytes() const { return page_bytes * num_blocks; }
};

struct Layout {
  CacheConfig config;
  LayoutSpec spec;
  std::vector<StateTensor> tensors; // flattened in (group, layer, state) order
  std::vector<ArenaSpec> arenas;

  std::int32_t num_groups() const { return static_cast<std::int32_t>(spec.groups.size()); }
  std::int64_t total_bytes() const;
};

inline constexpr std::int32_t kGroupsMax = 16;
inline constexpr std::int32_t kLayersMax = 1024;
inline constexpr std::int64_t kBlocksMax = std::int64_t{1} << 30;

// Throws InputError for impossible specs (element sizes, zero layers, tp, ...).
Layout build_layout(const CacheConfig& config, const LayoutSpec& spec);

std::int64_t round_up(std::int64_t value, std::int64_t multiple);

// `--layers N` of run, replay and scenario: each group keeps at most its first N layers, for a
// quick look at a deep model (every layer of a group is decided alike; depth multiplies the
// bytes, not the decisions). 0 keeps every layer; N outside 1..kLayersMax is an InputError.
// Returns the most layers a group had before.
std::int32_t cap_layers(LayoutSpec& spec, std::int32_t layers_max);
void check_layers_max(std::int32_t layers_max); // the InputError of cap_layers, alone

} // namespace mc::model
