// The bytes of state blocks that differ between two sets of arenas (the oracle's expected
// result and the backend's actual one), and their picture: per differing (tensor, block) a
// small grid of elements, expected beside actual, the differing elements coloured, the axes
// named as the text report names them (conv SD: token row x channel; conv DS: channel x
// token; temporal: element). Big blocks show a window around the first difference; layers
// whose blocks differ alike (same group, state, block and differing elements) are drawn once.
#pragma once

#include "model/arena.h"
#include "model/layout.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mc::show {

// How the elements of one block of a tensor are laid out as a grid.
struct GridAxes {
  std::string row_label; // "token row", "channel", "element"
  std::string col_label; // "channel", "token", "+"
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool flat = false; // temporal: row r, column c is element r * cols + c
};
GridAxes grid_axes(const model::StateTensor& tensor);

inline constexpr std::int64_t kWindowRowsMax = 16;
inline constexpr std::int64_t kWindowColsMax = 32;

struct BlockDiff {
  std::int32_t tensor = -1;
  std::int64_t block = -1;
  std::int64_t elements = 0;            // in the block's natural bytes
  std::int64_t elements_differing = 0;
  std::int64_t first_element = 0;       // the first differing element
  std::int64_t row0 = 0, col0 = 0;      // the window drawn, in grid coordinates
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint8_t> expected;   // the window's bytes, element after element
  std::vector<std::uint8_t> actual;
  std::vector<std::uint8_t> differs;    // per window element: 1 where the bytes differ
  std::vector<std::uint8_t> poison;     // per window element: 1 where actual is poison
  std::vector<std::int32_t> like_layers; // other layers whose same block differs alike
};

struct ArenaDiff {
  // The first blocks_max differing (tensor, block) pairs of distinct kinds, block by block;
  // a pair like one kept (same group, state, block and differing elements) is counted in
  // that one's like_layers instead.
  std::vector<BlockDiff> blocks;
  std::int64_t blocks_differing = 0;  // all of them
  std::int64_t padding_bytes = 0;     // differing bytes in page padding (outside every tensor)
  std::vector<std::string> padding;   // the first few such runs, named by arena and block
  bool empty() const { return blocks_differing == 0 && padding_bytes == 0; }
};

// Compares page by page; arenas of different counts or sizes compare up to the shorter.
ArenaDiff diff_arenas(const model::Layout& layout, std::span<const model::Arena> expected,
                      std::span<const model::Arena> actual, std::size_t blocks_max = 48);

// One block of one tensor as `arenas` hold it (no other side: nothing is marked as differing).
BlockDiff block_as_is(const model::Layout& layout, std::span<const model::Arena> arenas,
                      std::int32_t tensor, std::int64_t block);

// The grids of `diff`, each with an anchor id `<id_prefix>-t<tensor>-b<block>`.
std::string byte_grids_html(const model::Layout& layout, const ArenaDiff& diff,
                            std::string_view expected_name, std::string_view actual_name,
                            std::string_view id_prefix);

} // namespace mc::show
