// Block-table rows and copy arrows as SVG (table_rows.h).
#include "show/table_rows.h"

#include "show/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace mc::show {
namespace {

constexpr int kLabelW = 250; // the row's label left of its cells
constexpr int kCellW = 36;
constexpr int kCellH = 20;
constexpr int kArcAbove = 30; // room for arrows over the first group line
constexpr int kArcBelow = 26;
constexpr int kRowGap = 6;
constexpr int kLabelLineH = 13;

// The columns drawn: every column of a narrow table; of a wide one, the ends and the columns
// within two of an arrow's ends. -1 in the result stands for a run of left-out columns.
std::vector<std::int32_t> shown_columns(std::span<const TableRow> rows, std::int32_t width) {
  std::vector<std::int32_t> out;
  if (width <= kColsShownMax) {
    for (std::int32_t c = 0; c < width; ++c)
      out.push_back(c);
    return out;
  }
  std::set<std::int32_t> keep = {0, 1, width - 2, width - 1};
  for (const TableRow& row : rows)
    for (const GroupRow& g : row.groups)
      for (const Arrow& a : g.arrows)
        for (const std::int32_t end : {a.src_col, a.dst_col})
          for (std::int32_t c = end - 2; c <= end + 2; ++c)
            if (c >= 0 && c < width) keep.insert(c);
  std::int32_t last = -1;
  for (const std::int32_t c : keep) {
    if (c > last + 1) out.push_back(-1);
    out.push_back(c);
    last = c;
  }
  return out;
}

std::string cell_svg(std::int32_t block, const std::string& extra, int x, int y,
                     std::int32_t col) {
  const bool pad = block == -1, null = block == 0;
  const std::string cls = (pad ? "pad" : null ? "null" : "blk") + (extra.empty() ? "" : " " + extra);
  const std::string text = pad ? "pad" : null ? "null" : fmt::format("{}", block);
  return fmt::format("<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                     "data-t=\"column {}: {}\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
                     "pointer-events=\"none\">{}</text>",
                     cls, x, y, kCellW - 2, kCellH, col,
                     pad ? "pad slot (-1)" : null ? "the null block (0)" : "block " + text,
                     x + kCellW / 2 - 1, y + 14, text);
}

std::string arrow_svg(const Arrow& a, int x_src, int x_dst, int y_top, int y_bottom) {
  const int y = a.below ? y_bottom : y_top;
  const int dir = a.below ? 1 : -1;
  std::string path;
  int label_x = (x_src + x_dst) / 2, label_y = 0;
  if (x_src == x_dst) { // a copy within one column: a loop
    path = fmt::format("M{},{} C{},{} {},{} {},{}", x_src - 7, y, x_src - 18, y + dir * 24,
                       x_src + 18, y + dir * 24, x_src + 7, y);
    label_y = y + dir * 22;
    label_x = x_src + 14;
  } else {
    const int h = 14 + std::min(std::abs(x_dst - x_src) / 10, 10);
    path = fmt::format("M{},{} Q{},{} {},{}", x_src, y, (x_src + x_dst) / 2, y + dir * 2 * h,
                       x_dst, y);
    label_y = y + dir * h;
  }
  return fmt::format("<path class=\"arr {}\" d=\"{}\" marker-end=\"url(#ah-{})\" data-t=\"{}\"/>"
                     "<text class=\"big\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                     a.css, path, a.css, escape(a.tip), label_x, label_y + (a.below ? 9 : -2),
                     escape(a.label));
}

} // namespace

std::string table_rows_svg(std::span<const TableRow> rows, std::int32_t row_width) {
  const std::vector<std::int32_t> cols = shown_columns(rows, row_width);
  std::vector<int> x_of(static_cast<std::size_t>(std::max(row_width, 0)), -1);
  for (std::size_t i = 0; i < cols.size(); ++i)
    if (cols[i] >= 0) x_of[static_cast<std::size_t>(cols[i])] = kLabelW + static_cast<int>(i) * kCellW;
  const int width = kLabelW + static_cast<int>(cols.size()) * kCellW + 20;
  std::string body;
  int y = 14;
  // Column numbers on top.
  for (std::size_t i = 0; i < cols.size(); ++i)
    if (cols[i] >= 0)
      body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                          kLabelW + static_cast<int>(i) * kCellW + kCellW / 2 - 1, y, cols[i]);
  body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">column</text>\n",
                      kLabelW - 8, y);
  y += 4;
  for (const TableRow& row : rows) {
    // Each group line has room for its own arrows: over it (above) and under it (below).
    std::vector<std::pair<bool, bool>> room;
    int lines_h = 0;
    for (const GroupRow& g : row.groups) {
      bool above = false, below = false;
      for (const Arrow& a : g.arrows)
        (a.below ? below : above) = true;
      room.push_back({above, below});
      lines_h += (above ? kArcAbove : 4) + kCellH + (below ? kArcBelow : 4);
    }
    const int label_h = static_cast<int>(row.label.size()) * kLabelLineH + 6;
    const int height = std::max(lines_h + 4, label_h);
    body += fmt::format("<g class=\"trow\"{}><rect class=\"{}\" x=\"0\" y=\"{}\" width=\"{}\" "
                        "height=\"{}\" data-t=\"{}\"/>",
                        row.anchor.empty() ? "" : fmt::format(" id=\"{}\"", row.anchor),
                        row.css.empty() ? "rowok" : row.css, y, width, height - 2,
                        escape(row.tip));
    for (std::size_t l = 0; l < row.label.size(); ++l)
      body += fmt::format("<text class=\"{}\" x=\"4\" y=\"{}\">{}</text>", l == 0 ? "big" : "lbl",
                          y + 13 + static_cast<int>(l) * kLabelLineH, escape(row.label[l]));
    int gy = y;
    for (std::size_t gi = 0; gi < row.groups.size(); ++gi) {
      const GroupRow& g = row.groups[gi];
      gy += room[gi].first ? kArcAbove : 4;
      if (row.groups.size() > 1)
        body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">g{}</text>",
                            kLabelW - 4, gy + 14, gi);
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const int x = kLabelW + static_cast<int>(i) * kCellW;
        if (cols[i] < 0) {
          const std::int32_t from = i > 0 ? cols[i - 1] + 1 : 0;
          const std::int32_t to = i + 1 < cols.size() ? cols[i + 1] : row_width;
          body += fmt::format("<rect class=\"gap\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                              "data-t=\"columns {}-{} not drawn\"/><text x=\"{}\" y=\"{}\" "
                              "text-anchor=\"middle\" class=\"lbl\">\u2026{}</text>",
                              x, gy, kCellW - 2, kCellH, from, to - 1, x + kCellW / 2 - 1, gy + 14,
                              to - from);
          continue;
        }
        const auto c = static_cast<std::size_t>(cols[i]);
        if (c >= g.block_ids.size()) continue;
        body += cell_svg(g.block_ids[c], c < g.cell_css.size() ? g.cell_css[c] : "", x, gy,
                         cols[i]);
      }
      for (const Arrow& a : g.arrows) {
        const auto in = [&](std::int32_t col) {
          return col >= 0 && col < row_width && x_of[static_cast<std::size_t>(col)] >= 0;
        };
        if (!in(a.src_col) || !in(a.dst_col)) continue;
        body += arrow_svg(a, x_of[static_cast<std::size_t>(a.src_col)] + kCellW / 2 - 1,
                          x_of[static_cast<std::size_t>(a.dst_col)] + kCellW / 2 - 1, gy,
                          gy + kCellH);
      }
      gy += kCellH + (room[gi].second ? kArcBelow : 4);
    }
    body += "</g>\n";
    y += height + kRowGap;
  }
  return fmt::format("<svg class=\"tables\" width=\"{}\" height=\"{}\">\n{}</svg>\n", width, y + 4,
                     body);
}

} // namespace mc::show
