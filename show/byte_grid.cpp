// Differing state blocks and their byte grids (byte_grid.h).
#include "show/byte_grid.h"

#include "show/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace mc::show {
namespace {

constexpr std::size_t kPaddingRunsShownMax = 8;
constexpr int kCellPx = 13;
constexpr int kLabelPx = 84; // room for the row labels left of a grid
constexpr int kTopPx = 46;   // room for the side's name, the axis name and the column labels

std::string tensor_text(const model::StateTensor& t, std::int32_t index) {
  return fmt::format("group {} layer {} state {} (tensor {})", t.group, t.layer, t.shape.name,
                     index);
}

// Which elements of a block differ, as a hash: blocks of two layers that differ alike match.
std::uint64_t pattern_of(const model::StateTensor& t, const std::byte* e, const std::byte* a) {
  const std::int64_t n = t.elem_size;
  std::uint64_t hash = 1469598103934665603ULL; // FNV-1a over the differing element indices
  for (std::int64_t i = 0; i < t.natural_bytes / n; ++i)
    if (std::memcmp(e + i * n, a + i * n, static_cast<std::size_t>(n)) != 0)
      hash = (hash ^ static_cast<std::uint64_t>(i)) * 1099511628211ULL;
  return hash;
}

// The natural bytes of (t, block) in both arenas: counts and the window drawn.
BlockDiff block_diff(const model::StateTensor& t, std::int32_t index, std::int64_t block,
                     const std::byte* e, const std::byte* a, std::int64_t arena_offset) {
  const std::int64_t n = t.elem_size;
  const GridAxes axes = grid_axes(t);
  BlockDiff d{.tensor = index, .block = block, .elements = t.natural_bytes / n};
  for (std::int64_t i = 0; i < d.elements; ++i) {
    if (std::memcmp(e + i * n, a + i * n, static_cast<std::size_t>(n)) == 0) continue;
    if (d.elements_differing == 0) d.first_element = i;
    ++d.elements_differing;
  }
  // The grid position of element i: SD/temporal row-major, DS row-major too (dims are
  // [dim, state_len]), so row = i / cols for every layout.
  const std::int64_t r = d.first_element / axes.cols, c = d.first_element % axes.cols;
  d.rows = std::min(axes.rows, kWindowRowsMax);
  d.cols = std::min(axes.cols, kWindowColsMax);
  d.row0 = std::clamp<std::int64_t>(r - 2, 0, axes.rows - d.rows);
  d.col0 = std::clamp<std::int64_t>(c - 4, 0, axes.cols - d.cols);
  for (std::int64_t wr = 0; wr < d.rows; ++wr)
    for (std::int64_t wc = 0; wc < d.cols; ++wc) {
      const std::int64_t i = (d.row0 + wr) * axes.cols + d.col0 + wc;
      const bool inside = i < d.elements; // a flat grid's last row may be short
      bool poison = inside;
      for (std::int64_t k = 0; k < n; ++k) {
        const auto ev = inside ? static_cast<std::uint8_t>(e[i * n + k]) : std::uint8_t{0};
        const auto av = inside ? static_cast<std::uint8_t>(a[i * n + k]) : std::uint8_t{0};
        d.expected.push_back(ev);
        d.actual.push_back(av);
        poison = poison && av == model::poison_byte(arena_offset + i * n + k);
      }
      d.differs.push_back(inside && std::memcmp(e + i * n, a + i * n, n) != 0 ? 1 : 0);
      d.poison.push_back(poison ? 1 : 0);
    }
  return d;
}

std::string hex_of(const std::vector<std::uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// One grid (expected or actual) as an SVG group at (x, y).
std::string grid_svg(const BlockDiff& d, const GridAxes& axes, std::int32_t elem_size, bool actual,
                     int x, int y) {
  std::string out = fmt::format(
      "<g class=\"grid\" transform=\"translate({},{})\" data-w=\"{}\" data-n=\"{}\" "
      "data-r0=\"{}\" data-c0=\"{}\" data-rl=\"{}\" data-cl=\"{}\"{} data-e=\"{}\" "
      "data-a=\"{}\">\n",
      x, y, d.cols, elem_size, d.row0, d.col0, escape(axes.row_label), escape(axes.col_label),
      axes.flat ? fmt::format(" data-fw=\"{}\"", axes.cols) : "", hex_of(d.expected),
      hex_of(d.actual));
  for (std::int64_t r = 0; r < d.rows; ++r)
    for (std::int64_t c = 0; c < d.cols; ++c) {
      const auto i = static_cast<std::size_t>(r * d.cols + c);
      const char* cls = d.differs[i] ? (actual ? "ba" : "be") : (actual && d.poison[i] ? "bp" : "b");
      out += fmt::format("<rect class=\"{}\" data-i=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
                         "height=\"{}\"/>",
                         cls, i, c * kCellPx, r * kCellPx, kCellPx, kCellPx);
    }
  return out + "\n</g>\n";
}

// Labels of one grid's axes: the axis names, every few column indices, every row index.
std::string axes_svg(const BlockDiff& d, const GridAxes& axes, int x, int y, std::string_view side) {
  std::string out = fmt::format("<text class=\"big\" x=\"{}\" y=\"{}\">{}</text>", x, y - 32,
                                escape(side));
  out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\">{} \u2192</text>", x, y - 18,
                     escape(axes.col_label));
  const std::int64_t step = d.cols > 16 ? 4 : d.cols > 8 ? 2 : 1;
  for (std::int64_t c = 0; c < d.cols; c += step)
    out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\">{}</text>", x + c * kCellPx + 1,
                       y - 4, d.col0 + c);
  for (std::int64_t r = 0; r < d.rows; ++r)
    out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                       x - 4, y + r * kCellPx + 10,
                       axes.flat ? (d.row0 + r) * axes.cols : d.row0 + r);
  out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{} \u2193</text>",
                     x - 4, y - 4, escape(axes.row_label));
  return out;
}

std::string block_html(const model::Layout& layout, const BlockDiff& d,
                       std::string_view expected_name, std::string_view actual_name,
                       std::string_view id_prefix, const std::vector<std::int32_t>& like) {
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(d.tensor)];
  const GridAxes axes = grid_axes(t);
  const int grid_w = static_cast<int>(d.cols) * kCellPx;
  const int grid_h = static_cast<int>(d.rows) * kCellPx;
  const int second_x = kLabelPx + std::max(grid_w, 160) + kLabelPx + 10;
  std::string out = fmt::format(
      "<div class=\"bytes\" id=\"{}-t{}-b{}\">\n<h3>{}, block {}: {} of {} elements differ "
      "({} bytes each; first: {})</h3>\n",
      id_prefix, d.tensor, d.block, escape(tensor_text(t, d.tensor)), d.block,
      d.elements_differing, d.elements, t.elem_size,
      axes.flat ? fmt::format("element {}", d.first_element)
                : fmt::format("{} {}, {} {}", axes.row_label, d.first_element / axes.cols,
                              axes.col_label, d.first_element % axes.cols));
  if (d.rows < axes.rows || d.cols < axes.cols)
    out += fmt::format("<p class=\"note\">the block is {} x {} ({} x {}); shown: {} {}-{}, {} "
                       "{}-{}</p>\n",
                       axes.rows, axes.cols, axes.row_label, axes.col_label, axes.row_label,
                       axes.flat ? d.row0 * axes.cols : d.row0,
                       axes.flat ? (d.row0 + d.rows) * axes.cols - 1 : d.row0 + d.rows - 1,
                       axes.col_label, d.col0, d.col0 + d.cols - 1);
  if (!like.empty()) {
    std::vector<std::int64_t> layers(like.begin(), like.end());
    out += fmt::format("<p class=\"note\">and {} more layer{} like this (the same elements of "
                       "block {} differ): layers {}</p>\n",
                       like.size(), like.size() == 1 ? "" : "s", d.block, ranges_text(layers));
  }
  out += fmt::format("<svg width=\"{}\" height=\"{}\">\n", second_x + grid_w + 8,
                     kTopPx + grid_h + 6);
  out += axes_svg(d, axes, kLabelPx, kTopPx, expected_name);
  out += grid_svg(d, axes, t.elem_size, false, kLabelPx, kTopPx);
  out += axes_svg(d, axes, second_x, kTopPx, actual_name);
  out += grid_svg(d, axes, t.elem_size, true, second_x, kTopPx);
  return out + "</svg>\n</div>\n";
}

} // namespace

GridAxes grid_axes(const model::StateTensor& t) {
  if (t.kind() == model::StateKind::conv) {
    if (t.conv_layout == model::ConvLayout::SD)
      return {.row_label = "token row", .col_label = "channel", .rows = t.shape.conv_state_len,
              .cols = t.shape.conv_dim};
    return {.row_label = "channel", .col_label = "token", .rows = t.shape.conv_dim,
            .cols = t.shape.conv_state_len};
  }
  const std::int64_t elements = t.natural_bytes / t.elem_size;
  const std::int64_t last = t.shape.dims.empty() ? elements : t.shape.dims.back();
  const std::int64_t cols = std::clamp<std::int64_t>(last, 1, kWindowColsMax);
  return {.row_label = "element",
          .col_label = "+",
          .rows = (elements + cols - 1) / cols,
          .cols = cols,
          .flat = true};
}

BlockDiff block_as_is(const model::Layout& layout, std::span<const model::Arena> arenas,
                      std::int32_t tensor, std::int64_t block) {
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  const std::int64_t offset = t.block_offset_bytes(block);
  const std::byte* bytes = arenas[static_cast<std::size_t>(t.arena)].data() + offset;
  return block_diff(t, tensor, block, bytes, bytes, offset);
}

ArenaDiff diff_arenas(const model::Layout& layout, std::span<const model::Arena> expected,
                      std::span<const model::Arena> actual, std::size_t blocks_max) {
  ArenaDiff out;
  const std::size_t arenas = std::min({expected.size(), actual.size(), layout.arenas.size()});
  std::vector<std::vector<std::int32_t>> tensors(arenas); // per arena, in offset order
  for (std::size_t i = 0; i < layout.tensors.size(); ++i)
    if (static_cast<std::size_t>(layout.tensors[i].arena) < arenas)
      tensors[static_cast<std::size_t>(layout.tensors[i].arena)].push_back(
          static_cast<std::int32_t>(i));
  std::int64_t blocks = 0;
  for (std::size_t ai = 0; ai < arenas; ++ai)
    blocks = std::max(blocks, std::min(expected[ai].size_bytes(), actual[ai].size_bytes()) /
                                  layout.arenas[ai].page_bytes);
  using Key = std::tuple<std::int32_t, std::int32_t, std::int64_t, std::uint64_t>;
  std::map<Key, std::size_t> kept;
  // Block by block, every arena: the layers of one block come together and collapse.
  for (std::int64_t block = 0; block < blocks; ++block)
    for (std::size_t ai = 0; ai < arenas; ++ai) {
      const std::int64_t page = layout.arenas[ai].page_bytes;
      if ((block + 1) * page > std::min(expected[ai].size_bytes(), actual[ai].size_bytes()))
        continue;
      const std::byte* e = expected[ai].data() + block * page;
      const std::byte* a = actual[ai].data() + block * page;
      if (std::memcmp(e, a, static_cast<std::size_t>(page)) == 0) continue;
      std::vector<std::uint8_t> covered(static_cast<std::size_t>(page), 0);
      for (const std::int32_t ti : tensors[ai]) {
        const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(ti)];
        std::fill_n(covered.begin() + t.offset_bytes, t.natural_bytes, 1);
        const std::byte* te = e + t.offset_bytes;
        const std::byte* ta = a + t.offset_bytes;
        if (std::memcmp(te, ta, static_cast<std::size_t>(t.natural_bytes)) == 0) continue;
        ++out.blocks_differing;
        const Key key{t.group, t.state, block, pattern_of(t, te, ta)};
        if (const auto it = kept.find(key); it != kept.end()) {
          out.blocks[it->second].like_layers.push_back(t.layer);
        } else if (out.blocks.size() < blocks_max) {
          kept.emplace(key, out.blocks.size());
          out.blocks.push_back(block_diff(t, ti, block, te, ta, block * page + t.offset_bytes));
        }
      }
      std::int64_t padding = 0, first = -1;
      for (std::int64_t i = 0; i < page; ++i)
        if (!covered[static_cast<std::size_t>(i)] && e[i] != a[i]) {
          ++padding;
          if (first < 0) first = i;
        }
      out.padding_bytes += padding;
      if (padding > 0 && out.padding.size() < kPaddingRunsShownMax)
        out.padding.push_back(fmt::format("arena {} block {}: {} bytes of page padding differ, "
                                          "the first at byte {} of the {}-byte page",
                                          ai, block, padding, first, page));
    }
  return out;
}

std::string byte_grids_html(const model::Layout& layout, const ArenaDiff& diff,
                            std::string_view expected_name, std::string_view actual_name,
                            std::string_view id_prefix) {
  std::string out;
  if (diff.empty()) return "<p class=\"note\">every arena byte is equal</p>\n";
  out += fmt::format("<p>{} (tensor, block) pair{} differ{}{}.</p>\n", diff.blocks_differing,
                     diff.blocks_differing == 1 ? "" : "s",
                     diff.blocks_differing == 1 ? "s" : "",
                     diff.padding_bytes > 0
                         ? fmt::format("; {} bytes of page padding differ", diff.padding_bytes)
                         : "");
  for (const std::string& p : diff.padding)
    out += fmt::format("<p class=\"bad\">{}</p>\n", escape(p));
  std::int64_t shown = 0;
  for (const BlockDiff& d : diff.blocks) {
    out += block_html(layout, d, expected_name, actual_name, id_prefix, d.like_layers);
    shown += 1 + static_cast<std::int64_t>(d.like_layers.size());
  }
  if (diff.blocks_differing > shown)
    out += fmt::format("<p class=\"note\">{} more differing (tensor, block) pairs not drawn</p>\n",
                       diff.blocks_differing - shown);
  return out;
}

} // namespace mc::show
