// The kernel-level picture (kernel_view.h).
#include "show/kernel_view.h"

#include "model/launch_features.h"
#include "model/request_arrays.h"
#include "show/byte_grid.h"
#include "show/table_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace mc::show {
namespace {

using model::CopyDecision;

constexpr std::int32_t kArraySlotsShownMax = 64;

std::map<std::int32_t, std::vector<CopyDecision>> by_row(const model::LaunchResult* r) {
  std::map<std::int32_t, std::vector<CopyDecision>> out;
  if (r != nullptr)
    for (const CopyDecision& d : r->decisions)
      out[d.batch_row].push_back(d);
  return out;
}

// Where each real block sits: per group, block id -> (row, column) cells of the launched rows.
using Cells = std::vector<std::pair<std::int32_t, std::int32_t>>;
std::vector<std::map<std::int32_t, Cells>> block_cells(const model::LaunchCase& c) {
  std::vector<std::map<std::int32_t, Cells>> out(c.block_tables.groups.size());
  for (std::size_t g = 0; g < out.size(); ++g) {
    const model::BlockTable& t = c.block_tables.groups[g];
    for (std::int32_t r = 0; r < c.num_reqs && r < t.num_rows; ++r)
      for (std::int32_t col = 0; col < t.row_width; ++col)
        if (t.at(r, col) > model::kNullBlockId) out[g][t.at(r, col)].push_back({r, col});
  }
  return out;
}

// The column a decision reads: temporal states read the block at src_col + bias.
std::int32_t read_col(const model::Layout& layout, const CopyDecision& d) {
  const bool temporal =
      layout.tensors[static_cast<std::size_t>(d.tensor)].kind() == model::StateKind::temporal;
  return d.src_col + (temporal ? d.token_bias : 0);
}

std::vector<Arrow> arrows_of(const model::Layout& layout, const std::vector<CopyDecision>& ds,
                             std::int32_t group, const std::string& css, bool below) {
  std::vector<Arrow> out;
  std::set<std::tuple<std::int32_t, std::int32_t, std::int32_t, bool>> seen;
  for (const CopyDecision& d : ds) {
    if (d.group != group) continue;
    const bool temporal =
        layout.tensors[static_cast<std::size_t>(d.tensor)].kind() == model::StateKind::temporal;
    if (!seen.insert({read_col(layout, d), d.dst_col, d.token_bias, temporal}).second) continue;
    out.push_back(Arrow{
        .src_col = read_col(layout, d),
        .dst_col = d.dst_col,
        .label = fmt::format("{}+{}", temporal ? "t" : "c", d.token_bias),
        .css = css,
        .below = below,
        .tip = fmt::format("{} {}: {} column {} -> column {}, bias {}, block {} -> {}, offset "
                           "{}, {} bytes",
                           css == "exp" ? "expected" : "actual", temporal ? "temporal" : "conv",
                           temporal ? "reads (src_col + bias)" : "reads", read_col(layout, d),
                           d.dst_col, d.token_bias, d.src_block_id, d.dst_block_id,
                           d.src_byte_offset, d.bytes)});
  }
  return out;
}

std::string copies_text(const std::vector<CopyDecision>& ds) {
  if (ds.empty()) return "no copy";
  const CopyDecision& d = ds.front();
  return fmt::format("col {}+{} -> {} ({} states)", d.src_col, d.token_bias, d.dst_col, ds.size());
}

std::optional<std::int32_t> at(const std::vector<std::int32_t>& v, std::int32_t i) {
  if (i < 0 || i >= static_cast<std::int32_t>(v.size())) return std::nullopt;
  return v[static_cast<std::size_t>(i)];
}

// num_accepted before -> after: the array a kind writes (num_accepted_out for V1 postprocess).
std::string accepted_text(const model::LaunchCase& c, const model::LaunchResult& r,
                          std::int32_t slot) {
  const std::optional<std::int32_t> before = at(c.requests.num_accepted, slot);
  std::optional<std::int32_t> after = at(r.requests.num_accepted_out, slot);
  if (!after) after = at(r.requests.num_accepted, slot);
  if (!before && !after) return "";
  const std::string b = before ? fmt::format("{}", *before) : "-";
  const std::string a = after ? fmt::format("{}", *after) : "-";
  const bool reset = before && after && *after == 1 && *before != 1;
  return fmt::format("a {} -> {}{}", b, a, reset ? " (reset)" : "");
}

struct RowFacts {
  std::int32_t slot = -1;
  bool differs = false; // the backend's decisions or arrays of this row differ
  bool touches_diff = false; // a differing block is this row's copy destination
  bool aliases = false;      // one block in two columns of the row
  std::vector<std::string> shares; // "block 7 with row 3"
  std::string signature; // rows alike share it
};

bool arrays_differ_at(const model::LaunchResult& e, const model::LaunchResult& a,
                      std::int32_t slot) {
  for (const model::RequestArrayField& f : model::kRequestArrays)
    if (f.indexing == model::ArrayIndexing::by_slot && at(e.requests.*f.member, slot) !=
                                                           at(a.requests.*f.member, slot))
      return true;
  return false;
}

struct KernelPicture {
  const KernelReport& r;
  const model::LaunchCase& c;
  std::map<std::int32_t, std::vector<CopyDecision>> expected_rows, actual_rows;
  std::vector<std::map<std::int32_t, Cells>> cells;
  std::vector<std::set<std::int64_t>> diff_blocks; // per group, blocks whose bytes differ
  ArenaDiff diff;
  std::int32_t width = 0, stride = 0; // the largest row width and row stride of the tables

  explicit KernelPicture(const KernelReport& report)
      : r(report), c(report.launch), expected_rows(by_row(&report.expected)),
        actual_rows(by_row(report.actual)), cells(block_cells(report.launch)),
        diff_blocks(report.launch.block_tables.groups.size()) {
    if (r.actual != nullptr)
      diff = diff_arenas(c.layout, r.expected.arenas, r.actual->arenas);
    for (const model::BlockTable& t : c.block_tables.groups) {
      width = std::max(width, t.row_width);
      stride = std::max(stride, t.row_stride);
    }
    for (const BlockDiff& d : diff.blocks)
      diff_blocks[static_cast<std::size_t>(
                      c.layout.tensors[static_cast<std::size_t>(d.tensor)].group)]
          .insert(d.block);
  }

  RowFacts facts(std::int32_t row) const {
    RowFacts f{.slot = model::slot_of_row(c.kind, c.requests, row)};
    const auto& ex = expected_rows.contains(row) ? expected_rows.at(row) : kNone;
    const auto& ac = actual_rows.contains(row) ? actual_rows.at(row) : kNone;
    if (r.actual != nullptr)
      f.differs = ex != ac || (f.slot >= 0 && arrays_differ_at(r.expected, *r.actual, f.slot));
    for (std::size_t g = 0; g < c.block_tables.groups.size(); ++g) {
      const model::BlockTable& t = c.block_tables.groups[g];
      for (std::int32_t col = 0; col < t.row_width; ++col) {
        const std::int32_t b = t.at(row, col);
        if (b <= model::kNullBlockId) continue;
        for (const auto& [other_row, other_col] : cells[g].at(b)) {
          if (other_row == row && other_col != col) f.aliases = true;
          if (other_row != row && f.shares.size() < 3)
            f.shares.push_back(fmt::format("g{} block {} with row {}", g, b, other_row));
        }
      }
      for (const CopyDecision& d : ex)
        if (d.group == static_cast<std::int32_t>(g) && diff_blocks[g].contains(d.dst_block_id))
          f.touches_diff = true;
    }
    std::int32_t nulls = 0, pads = 0;
    for (const model::BlockTable& t : c.block_tables.groups)
      for (std::int32_t col = 0; col < t.row_width; ++col) {
        nulls += t.at(row, col) == model::kNullBlockId;
        pads += t.at(row, col) == model::kPadSlot;
      }
    f.signature = fmt::format("{}{}{}{}", f.differs ? "D" : "", f.touches_diff ? "T" : "",
                              f.aliases ? "A" : "", f.shares.empty() ? "" : "S");
    f.signature += f.slot < 0 ? "skipped"
                  : ex.empty()
                      ? fmt::format("none n{} p{} {}", nulls, pads, accepted_text(c, r.expected, f.slot))
                      : fmt::format("copy {} {} n{} p{} {}", ex.front().dst_col - ex.front().src_col,
                                    ex.front().token_bias, nulls, pads,
                                    accepted_text(c, r.expected, f.slot));
    return f;
  }

  TableRow table_row(std::int32_t row, const RowFacts& f, std::size_t alike,
                     const std::vector<std::int64_t>& alike_rows) const {
    const auto& ex = expected_rows.contains(row) ? expected_rows.at(row) : kNone;
    const auto& ac = actual_rows.contains(row) ? actual_rows.at(row) : kNone;
    TableRow t;
    t.anchor = fmt::format("row-{}", row);
    t.label.push_back(f.slot < 0 ? fmt::format("row {} (skipped: idx_mapping -1)", row)
                                 : fmt::format("row {} \u00b7 slot {}", row, f.slot));
    if (f.slot >= 0) {
      t.label.push_back("expected: " + copies_text(ex));
      if (r.actual != nullptr && ex != ac) t.label.push_back("actual: " + copies_text(ac));
      const std::string a = accepted_text(c, r.expected, f.slot);
      if (!a.empty())
        t.label.push_back(r.actual != nullptr && accepted_text(c, *r.actual, f.slot) != a
                              ? a + "; actual " + accepted_text(c, *r.actual, f.slot)
                              : a);
    }
    if (f.aliases) t.label.push_back("aliases a block in two columns");
    if (!f.shares.empty()) t.label.push_back("shares " + f.shares.front());
    if (alike > 0)
      t.label.push_back(fmt::format("{} rows like this: {}", alike, ranges_text(alike_rows, 6)));
    t.css = f.differs || f.touches_diff ? "rowbad" : f.aliases || !f.shares.empty() ? "rowalias" : "";
    std::string tip;
    for (const model::RequestArrayField& field : model::kRequestArrays)
      if (field.indexing == model::ArrayIndexing::by_slot)
        if (const auto v = at(c.requests.*field.member, f.slot))
          tip += fmt::format("{}{}={}", tip.empty() ? "" : " ", field.name, *v);
    t.tip = fmt::format("row {} before the launch: {}", row, tip);
    for (std::size_t g = 0; g < c.block_tables.groups.size(); ++g) {
      const model::BlockTable& bt = c.block_tables.groups[g];
      GroupRow gr;
      for (std::int32_t col = 0; col < bt.row_width; ++col) {
        gr.block_ids.push_back(bt.at(row, col));
        std::string css;
        const std::int32_t b = bt.at(row, col);
        if (b > model::kNullBlockId) {
          const Cells& where = cells[g].at(b);
          const bool alias = std::any_of(where.begin(), where.end(), [&](const auto& rc) {
            return rc.first == row && rc.second != col;
          });
          const bool shared = std::any_of(where.begin(), where.end(),
                                          [&](const auto& rc) { return rc.first != row; });
          if (shared) css += "shared";
          if (alias) css += css.empty() ? "alias" : " alias";
        }
        for (const CopyDecision& d : ex)
          if (d.group == static_cast<std::int32_t>(g)) {
            if (read_col(c.layout, d) == col && css.find("src") == std::string::npos) css += " src";
            if (d.dst_col == col && css.find("dst") == std::string::npos) css += " dst";
          }
        gr.cell_css.push_back(css);
      }
      gr.arrows = arrows_of(c.layout, ex, static_cast<std::int32_t>(g), "exp", false);
      if (r.actual != nullptr && ex != ac)
        for (Arrow& a : arrows_of(c.layout, ac, static_cast<std::int32_t>(g), "act", true))
          gr.arrows.push_back(std::move(a));
      t.groups.push_back(std::move(gr));
    }
    return t;
  }

  std::string rows_html() const {
    std::vector<RowFacts> all;
    for (std::int32_t row = 0; row < c.num_reqs; ++row)
      all.push_back(facts(row));
    // Rows alike: same signature, nothing special about them; the first of each is drawn.
    std::map<std::string, std::int32_t> first_of;
    std::map<std::int32_t, std::vector<std::int64_t>> alike;
    std::vector<std::int32_t> drawn;
    bool first_bad_drawn = false;
    for (std::int32_t row = 0; row < c.num_reqs; ++row) {
      const RowFacts& f = all[static_cast<std::size_t>(row)];
      // The first row whose result differs is always drawn on its own; others, failing ones
      // too, collapse with the rows that behave alike.
      const bool special = (f.differs || f.touches_diff) && !first_bad_drawn;
      first_bad_drawn = first_bad_drawn || special;
      if (!special) {
        const auto [it, inserted] = first_of.try_emplace(f.signature, row);
        if (!inserted) {
          alike[it->second].push_back(row);
          continue;
        }
      }
      drawn.push_back(row);
    }
    std::vector<TableRow> rows;
    std::size_t not_drawn = 0;
    for (const std::int32_t row : drawn) {
      if (static_cast<std::int32_t>(rows.size()) == kRowsDrawnMax) {
        ++not_drawn;
        continue;
      }
      const std::vector<std::int64_t>& like = alike[row];
      rows.push_back(table_row(row, all[static_cast<std::size_t>(row)], like.size(), like));
    }
    std::string out = table_rows_svg(rows, width);
    if (not_drawn > 0)
      out += fmt::format("<p class=\"note\">{} more rows of other behaviours not drawn (at most {} "
                         "rows are)</p>\n",
                         not_drawn, kRowsDrawnMax);
    return out;
  }

  std::string arrays_html() const {
    std::string out = "<table class=\"mono\"><tr><th>array</th><th>before</th><th>expected after"
                      "</th>";
    if (r.actual != nullptr) out += "<th>actual after</th>";
    out += "</tr>\n";
    const auto text = [](const std::vector<std::int32_t>& v) {
      if (v.empty()) return std::string("-");
      const std::size_t n = std::min<std::size_t>(v.size(), kArraySlotsShownMax);
      std::string s = fmt::format("[{}", fmt::join(v.begin(), v.begin() + static_cast<long>(n), ", "));
      return s + (n < v.size() ? fmt::format(", ... {} in all]", v.size()) : "]");
    };
    for (const model::RequestArrayField& f : model::kRequestArrays) {
      const auto& before = c.requests.*f.member;
      const auto& after = r.expected.requests.*f.member;
      if (before.empty() && after.empty()) continue;
      const bool bad = r.actual != nullptr && r.actual->requests.*f.member != after;
      out += fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td>", bad ? " class=\"bad\"" : "",
                         f.name, text(before), text(after));
      if (r.actual != nullptr) out += fmt::format("<td>{}</td>", text(r.actual->requests.*f.member));
      out += "</tr>\n";
    }
    return out + "</table>\n";
  }

  static inline const std::vector<CopyDecision> kNone{};
};

constexpr LegendItem kKernelLegend[] = {
    {"blk", "physical block (its id)"},
    {"null", "the null block (0)"},
    {"pad", "pad slot (-1)"},
    {"src", "column a copy reads"},
    {"dst", "column a copy writes"},
    {"shared alias", "block in two columns (alias, orange edge) or shared with another row"},
    {"rowbad", "row whose result differs"},
    {"be", "expected byte that differs"},
    {"ba", "actual byte that differs"},
    {"bp", "actual byte still poison (never written)"},
};

} // namespace

std::string kernel_report_html(const KernelReport& report) {
  const model::LaunchCase& c = report.launch;
  const KernelPicture picture(report);
  std::string body = header_html(report.header);
  body += legend_html(kKernelLegend);
  body += "<p class=\"note\">arrows: <span style=\"color:#1b7f3b\">expected (the oracle)</span> "
          "above a row, <span style=\"color:#c62828\">actual (" +
          escape(report.actual_name) +
          ")</span> dashed below it where it differs; label c+b: a conv copy with token bias b "
          "(the window shifts by b), t+b: a temporal copy reading column src + b</p>\n";
  body += fmt::format(
      "<h2 id=\"tables\">{}: block tables and decisions</h2>\n<p>{} batch rows "
      "over {} slots, {} group{}, tables width {} (stride {}), {} state tensors, "
      "B = {}, {} spec tokens, conv {}; {} copies expected{}</p>\n",
      model::to_string(c.kind), c.num_reqs, c.num_slots, c.block_tables.groups.size(),
      c.block_tables.groups.size() == 1 ? "" : "s", picture.width, picture.stride,
      c.layout.tensors.size(), c.layout.config.mamba_block_size, c.layout.config.num_spec_tokens,
      model::to_string(c.layout.config.conv_layout), report.expected.decisions.size(),
      report.actual != nullptr ? fmt::format(", {} made", report.actual->decisions.size()) : "");
  if (report.expected.status == model::LaunchStatus::unsupported)
    body += fmt::format("<p class=\"bad\">the oracle calls the launch unsupported: {}</p>\n",
                        escape(report.expected.unsupported_reason));
  body += picture.rows_html();
  body += "<h2 id=\"bytes\">Differing state blocks</h2>\n";
  body += report.actual != nullptr
              ? byte_grids_html(c.layout, picture.diff, "expected (oracle)",
                                "actual (" + report.actual_name + ")", "bytes")
              : "<p class=\"note\">the backend was not run: no bytes to compare</p>\n";
  body += "<h2 id=\"arrays\">Per-request arrays</h2>\n" + picture.arrays_html();
  return page_html(report.header.title, body);
}

} // namespace mc::show
