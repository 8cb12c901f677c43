// Block-table rows and copy arrows as SVG (table_rows.h).
#include "show/table_rows.h"

#include "show/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
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

// One box of a drawn line: a column, or a run of columns drawn as one box (a run of null
// blocks or pad slots, or columns far from every arrow in a wide row).
struct Segment {
  std::int32_t from = 0, to = 0; // columns [from, to)
  enum Kind : std::uint8_t { column, nulls, pads, gap } kind = column;
};

// The boxes of one group line: every column of a short plain row; runs of three or more null
// blocks or pad slots that no arrow touches become one box; a line still wider than
// kColsShownMax keeps its ends and the columns within two of an arrow's ends.
std::vector<Segment> segments_of(const GroupRow& g) {
  const auto width = static_cast<std::int32_t>(g.block_ids.size());
  std::set<std::int32_t> ends;
  for (const Arrow& a : g.arrows) {
    ends.insert(a.src_col);
    ends.insert(a.dst_col);
  }
  std::vector<Segment> out;
  for (std::int32_t c = 0; c < width;) {
    const std::int32_t b = g.block_ids[static_cast<std::size_t>(c)];
    std::int32_t e = c;
    if (b <= 0)
      while (e < width && g.block_ids[static_cast<std::size_t>(e)] == b && !ends.contains(e))
        ++e;
    if (e - c >= 3) {
      out.push_back({c, e, b == 0 ? Segment::nulls : Segment::pads});
      c = e;
      continue;
    }
    out.push_back({c, c + 1, Segment::column});
    ++c;
  }
  if (static_cast<std::int32_t>(out.size()) <= kColsShownMax) return out;
  const auto near = [&](std::int32_t c) {
    if (c < 2 || c >= width - 2) return true;
    for (const std::int32_t e : ends)
      if (c >= e - 2 && c <= e + 2) return true;
    return false;
  };
  std::vector<Segment> kept;
  for (const Segment& seg : out) {
    if (seg.kind != Segment::column || near(seg.from)) {
      kept.push_back(seg);
    } else if (!kept.empty() && kept.back().kind == Segment::gap) {
      kept.back().to = seg.to;
    } else {
      kept.push_back({seg.from, seg.to, Segment::gap});
    }
  }
  return kept;
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
  std::vector<std::vector<std::vector<Segment>>> lines; // per row, per group
  bool compressed = false;
  std::size_t boxes_max = 0;
  for (const TableRow& row : rows) {
    lines.emplace_back();
    for (const GroupRow& g : row.groups) {
      lines.back().push_back(segments_of(g));
      compressed = compressed || lines.back().back().size() != g.block_ids.size();
      boxes_max = std::max(boxes_max, lines.back().back().size());
    }
  }
  const int width = kLabelW + static_cast<int>(std::max<std::size_t>(
                                  boxes_max, static_cast<std::size_t>(std::max(row_width, 0)) *
                                                 (compressed ? 0 : 1))) *
                                  kCellW +
                    20;
  const int svg_width = std::max(width, 760);
  std::string body;
  int y = 14;
  if (!compressed) { // one header of column numbers; compressed lines number their own cells
    for (std::int32_t c = 0; c < row_width; ++c)
      body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                          kLabelW + c * kCellW + kCellW / 2 - 1, y, c);
    body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">column</text>\n",
                        kLabelW - 8, y);
  } else {
    body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\">small numbers over the boxes: "
                        "columns; runs of null blocks and pad slots are one box</text>\n",
                        kLabelW, y);
  }
  y += 4;
  for (std::size_t ri = 0; ri < rows.size(); ++ri) {
    const TableRow& row = rows[ri];
    // Each group line has room for its own arrows: over it (above) and under it (below).
    std::vector<std::pair<bool, bool>> room;
    int lines_h = 0;
    for (const GroupRow& g : row.groups) {
      bool above = false, below = false;
      for (const Arrow& a : g.arrows)
        (a.below ? below : above) = true;
      room.push_back({above, below});
      lines_h += (above ? kArcAbove : compressed ? 10 : 4) + kCellH + (below ? kArcBelow : 4);
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
      const std::vector<Segment>& segs = lines[ri][gi];
      gy += room[gi].first ? kArcAbove : compressed ? 10 : 4;
      if (row.groups.size() > 1)
        body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">g{}</text>",
                            kLabelW - 4, gy + 14, gi);
      std::map<std::int32_t, int> x_of; // column -> x of its box
      for (std::size_t i = 0; i < segs.size(); ++i) {
        const Segment& seg = segs[i];
        const int x = kLabelW + static_cast<int>(i) * kCellW;
        if (seg.kind == Segment::column) {
          const auto c = static_cast<std::size_t>(seg.from);
          x_of[seg.from] = x;
          body += cell_svg(g.block_ids[c], c < g.cell_css.size() ? g.cell_css[c] : "", x, gy,
                           seg.from);
          if (compressed)
            body += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
                                "font-size=\"7\">{}</text>",
                                x + kCellW / 2 - 1, gy - 2, seg.from);
          continue;
        }
        const char* cls = seg.kind == Segment::nulls  ? "null"
                          : seg.kind == Segment::pads ? "pad"
                                                      : "gap";
        body += fmt::format("<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                            "data-t=\"columns {}-{}: {}\"/><text x=\"{}\" y=\"{}\" "
                            "text-anchor=\"middle\" font-size=\"8\" pointer-events=\"none\">{}"
                            "\u00d7{}</text>",
                            cls, x, gy, kCellW - 2, kCellH, seg.from, seg.to - 1,
                            seg.kind == Segment::nulls  ? "null blocks"
                            : seg.kind == Segment::pads ? "pad slots"
                                                        : "not drawn",
                            x + kCellW / 2 - 1, gy + 14, seg.kind == Segment::gap ? "\u2026" : cls,
                            seg.to - seg.from);
      }
      for (const Arrow& a : g.arrows) {
        if (!x_of.contains(a.src_col) || !x_of.contains(a.dst_col)) continue;
        body += arrow_svg(a, x_of[a.src_col] + kCellW / 2 - 1, x_of[a.dst_col] + kCellW / 2 - 1,
                          gy, gy + kCellH);
      }
      gy += kCellH + (room[gi].second ? kArcBelow : 4);
    }
    body += "</g>\n";
    y += height + kRowGap;
  }
  return fmt::format("<svg class=\"tables\" width=\"{}\" height=\"{}\">\n{}</svg>\n", svg_width, y + 4,
                     body);
}

} // namespace mc::show
