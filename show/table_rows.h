// Block-table rows as boxes (one per column: the physical block id, the null block and pad
// slots marked), with copies drawn as arrows from the source column to the destination column
// labelled with the token bias: the kernel view draws a launch's rows with them, the engine
// view a step's rows. Wide tables keep the columns near an arrow and the ends of the row;
// the columns between are one box saying how many were left out.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mc::show {

struct Arrow {
  std::int32_t src_col = 0;
  std::int32_t dst_col = 0;
  std::string label; // "+2" (the token bias)
  std::string css;   // exp (expected), act (actual), pre (pre-step copy), post (post-step copy)
  bool below = false; // drawn under the row (the actual decision under the expected one)
  std::string tip;    // hover text
};

struct GroupRow {
  std::vector<std::int32_t> block_ids;  // the row's meaningful columns
  std::vector<std::string> cell_css;    // per column, extra classes ("src", "alias", ...)
  std::vector<Arrow> arrows;
};

struct TableRow {
  std::vector<std::string> label; // lines left of the row
  std::string css;                // the row's background: rowok, rowbad, rowalias
  std::string tip;
  std::string anchor;             // an id for links, or empty
  std::vector<GroupRow> groups;
};

inline constexpr std::int32_t kColsShownMax = 40;

// One SVG of `rows`, every row `row_width` columns wide (the widest when they differ).
std::string table_rows_svg(std::span<const TableRow> rows, std::int32_t row_width);

} // namespace mc::show
