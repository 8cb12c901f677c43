// The engine-level picture (engine_view.h).
#include "show/engine_view.h"

#include "show/table_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace mc::show {
namespace {

using harness::RowView;
using harness::StepView;

constexpr int kStepW = 30;
constexpr int kLaneH = 34;
constexpr int kLaneLabelW = 130;
constexpr int kTopH = 40;
constexpr std::size_t kExplainCharsMax = 12000;
constexpr std::size_t kPanelRowsMax = 48;

struct Cell {
  const RowView* row = nullptr;
  bool preempted = false;
  bool finished = false;
  std::vector<std::int32_t> allocated; // blocks new in the request's tables this step
  std::vector<std::int32_t> freed;     // blocks of this request the block manager freed
};

struct Timeline {
  std::size_t first = 0, end = 0; // the views drawn: [first, end)
  std::vector<std::string> lanes; // request ids in order of first appearance
  std::map<std::string, std::vector<Cell>> cells;
  std::vector<std::int64_t> unowned_frees; // per drawn step: freed blocks of no known lane
};

std::string ids(const std::vector<std::int32_t>& v) { return fmt::format("{}", fmt::join(v, " ")); }

std::optional<std::size_t> failing_index(const EngineReport& r) {
  if (!r.failure) return std::nullopt;
  for (std::size_t i = 0; i < r.views.size(); ++i)
    if (r.views[i].step == r.failure->step) return i;
  return std::nullopt;
}

Timeline build_timeline(const EngineReport& r) {
  Timeline t;
  const std::size_t n = r.views.size();
  t.end = n;
  if (n > kStepsDrawnMax) { // the window ends just after the failing step, or is the first one
    const std::optional<std::size_t> f = failing_index(r);
    t.end = std::min(n, std::max(f ? *f + 3 : 0, kStepsDrawnMax));
    t.first = t.end - kStepsDrawnMax;
  }
  const std::size_t drawn = t.end - t.first;
  t.unowned_frees.assign(drawn, 0);
  std::map<std::string, std::vector<std::set<std::int32_t>>> held; // request -> group -> blocks
  std::vector<std::map<std::int32_t, std::string>> owner;          // group -> block -> request
  const auto lane = [&](const std::string& id) -> std::vector<Cell>& {
    auto [it, inserted] = t.cells.try_emplace(id, std::vector<Cell>(drawn));
    if (inserted) t.lanes.push_back(id);
    return it->second;
  };
  for (std::size_t i = 0; i < t.end; ++i) {
    const StepView& v = r.views[i];
    const bool in = i >= t.first;
    const std::size_t k = i - t.first;
    if (owner.size() < v.freed.size()) owner.resize(v.freed.size());
    for (std::size_t g = 0; g < v.freed.size(); ++g)
      for (const std::int32_t b : v.freed[g]) {
        const auto it = owner[g].find(b);
        if (it == owner[g].end()) {
          if (in) ++t.unowned_frees[k];
          continue;
        }
        if (in) lane(it->second)[k].freed.push_back(b);
        owner[g].erase(it);
      }
    for (const RowView& row : v.rows) {
      std::vector<std::set<std::int32_t>>& mine = held[row.req_id];
      mine.resize(row.table.size());
      std::vector<std::int32_t> fresh;
      for (std::size_t g = 0; g < row.table.size(); ++g) {
        if (owner.size() <= g) owner.resize(g + 1);
        for (const std::int32_t b : row.table[g])
          if (b > 0 && mine[g].insert(b).second) {
            fresh.push_back(b);
            owner[g][b] = row.req_id;
          }
      }
      if (!in) continue;
      Cell& c = lane(row.req_id)[k];
      c.row = &row;
      c.allocated = std::move(fresh);
    }
    if (!in) continue;
    for (const std::string& id : v.preempted) {
      lane(id)[k].preempted = true;
      held.erase(id);
    }
    for (const std::string& id : v.finished) {
      lane(id)[k].finished = true;
      held.erase(id);
    }
  }
  return t;
}

std::string kind_of(const RowView& r) {
  return r.is_new ? "new" : r.resumed ? "resumed" : "running";
}

std::string copy_text(const std::optional<harness::CopyView>& c) {
  if (!c) return "none";
  return fmt::format("col {}+{} -> {} ({} states)", c->src_col, c->token_bias, c->dst_col, c->states);
}

std::string cell_tip(const std::string& id, std::int64_t step, const Cell& c) {
  std::string tip = fmt::format("request {}, step {}", id, step);
  if (const RowView* r = c.row) {
    tip += fmt::format("\n{} row {}: computed {}, scheduled {}, drafts {}, accepted {}", kind_of(*r),
                       r->batch_row, r->computed_before, r->scheduled, r->drafts, r->accepted);
    if (r->prefix_hit_tokens && *r->prefix_hit_tokens > 0)
      tip += fmt::format("\nprefix hit: {} tokens from the cache", *r->prefix_hit_tokens);
    tip += fmt::format("\nstate column {} -> {}, num_accepted {} -> {}",
                       r->state_col_before ? fmt::format("{}", *r->state_col_before) : "-",
                       r->state_col_after ? fmt::format("{}", *r->state_col_after) : "-",
                       r->num_accepted_before ? fmt::format("{}", *r->num_accepted_before) : "-",
                       r->num_accepted_after ? fmt::format("{}", *r->num_accepted_after) : "-");
    tip += fmt::format("\npre-copy {}\npost-copy {}", copy_text(r->pre_copy), copy_text(r->post_copy));
  }
  if (!c.allocated.empty()) tip += fmt::format("\nallocated blocks {}", ids(c.allocated));
  if (!c.freed.empty()) tip += fmt::format("\nfreed blocks {}", ids(c.freed));
  if (c.preempted) tip += "\npreempted";
  if (c.finished) tip += "\nfinished";
  return tip;
}

// What a lane does, step by step, without ids or block numbers: lanes alike share it.
std::string lane_signature(const std::vector<Cell>& cells) {
  std::string s;
  for (const Cell& c : cells) {
    if (const RowView* r = c.row)
      s += fmt::format("{}:{}:{}:{}:{}:{}{}{}|", kind_of(*r), r->scheduled, r->drafts, r->accepted,
                       r->prefix_hit_tokens.value_or(0), r->pre_copy ? "p" : "",
                       r->post_copy ? "q" : "", c.allocated.size());
    else
      s += "-|";
    s += c.preempted ? "P" : "";
    s += c.finished ? "F" : "";
  }
  return s;
}

std::string cell_svg(const Cell& c, const std::string& id, std::int64_t step, int x, int y) {
  const int w = kStepW - 2, h = kLaneH - 8;
  std::string out = fmt::format("<g data-step=\"{}\">", step);
  const std::string tip = escape(cell_tip(id, step, c));
  if (const RowView* r = c.row) {
    const bool decode = r->scheduled == 1 + r->drafts && !r->is_new && !r->resumed;
    out += fmt::format("<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                       "data-t=\"{}\"/>",
                       decode ? "decode" : "prefill", x, y, w, h, tip);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" pointer-events=\"none\">{}"
                       "</text>",
                       x + w / 2, y + 11, r->scheduled);
    if (r->drafts > 0)
      out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
                         "font-size=\"8\" pointer-events=\"none\">{}/{}</text>",
                         x + w / 2, y + 22, r->accepted, r->drafts);
    if (r->prefix_hit_tokens && *r->prefix_hit_tokens > 0)
      out += fmt::format("<circle class=\"hit\" cx=\"{}\" cy=\"{}\" r=\"3.5\" data-t=\"prefix hit: "
                         "{} tokens\"/>",
                         x + 4, y + 4, *r->prefix_hit_tokens);
    if (r->resumed)
      out += fmt::format("<circle class=\"resume\" cx=\"{}\" cy=\"{}\" r=\"3.5\" "
                         "data-t=\"resumed\"/>",
                         x + 4, y + h - 4);
    if (r->pre_copy)
      out += fmt::format("<path class=\"arr pre\" d=\"M{},{} L{},{}\" marker-end=\"url(#ah-pre)\" "
                         "data-t=\"pre-copy {}\"/>",
                         x + 3, y - 2, x + w - 3, y - 2, copy_text(r->pre_copy));
    if (r->post_copy)
      out += fmt::format("<path class=\"arr post\" d=\"M{},{} L{},{}\" "
                         "marker-end=\"url(#ah-post)\" data-t=\"post-copy {}\"/>",
                         x + 3, y + h + 2, x + w - 3, y + h + 2, copy_text(r->post_copy));
  } else {
    out += fmt::format("<rect class=\"idle\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                       "data-t=\"{}\"/>",
                       x, y, w, h, tip);
  }
  if (!c.allocated.empty())
    out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"8\" "
                       "fill=\"#1565c0\" data-t=\"allocated blocks {}\">+{}</text>",
                       x + w - 1, y + 8, ids(c.allocated), c.allocated.size());
  if (!c.freed.empty())
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"8\" "
                       "fill=\"#ef6c00\" data-t=\"freed blocks {}\">-{}</text>",
                       x + w - 1, y + h - 2, ids(c.freed), c.freed.size());
  if (c.preempted)
    out += fmt::format("<text class=\"preempt\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
                       "font-size=\"13\" data-t=\"preempted\">\u2715</text>",
                       x + w / 2, y + h / 2 + 5);
  if (c.finished)
    out += fmt::format("<rect class=\"finish\" x=\"{}\" y=\"{}\" width=\"5\" height=\"5\" "
                       "data-t=\"finished\"/>",
                       x + w - 6, y + h / 2 - 2);
  return out + "</g>";
}

struct Lanes {
  std::vector<std::string> drawn;
  std::map<std::string, std::vector<std::string>> alike; // drawn lane -> lanes like it
  std::size_t not_drawn = 0;
};

Lanes pick_lanes(const Timeline& t, const EngineReport& r) {
  Lanes out;
  std::map<std::string, std::string> first_of;
  for (const std::string& id : t.lanes) {
    const bool special = r.failure && r.failure->request == id;
    if (!special) {
      const auto [it, inserted] = first_of.try_emplace(lane_signature(t.cells.at(id)), id);
      if (!inserted) {
        out.alike[it->second].push_back(id);
        continue;
      }
    }
    if (out.drawn.size() == kLanesDrawnMax && !special) {
      ++out.not_drawn;
      continue;
    }
    out.drawn.push_back(id);
  }
  return out;
}

std::string timeline_svg(const EngineReport& r, const Timeline& t, const Lanes& lanes) {
  const std::size_t steps = t.end - t.first;
  const int width = kLaneLabelW + static_cast<int>(steps) * kStepW + 10;
  const int height = kTopH + static_cast<int>(lanes.drawn.size()) * kLaneH + 6;
  std::string out = fmt::format("<svg class=\"timeline\" width=\"{}\" height=\"{}\">\n", width,
                                height);
  const std::optional<std::size_t> failing = failing_index(r);
  const int label_every = steps > 60 ? 10 : steps > 30 ? 5 : 1;
  for (std::size_t k = 0; k < steps; ++k) {
    const std::int64_t step = r.views[t.first + k].step;
    const int x = kLaneLabelW + static_cast<int>(k) * kStepW;
    const bool fails = failing && *failing == t.first + k;
    out += fmt::format("<rect class=\"stepcol{}\" data-step=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
                       "height=\"{}\" data-t=\"step {}: click for what the oracle believes\"/>",
                       fails ? " failcol" : "", step, x, kTopH - 12, kStepW, height - kTopH + 12,
                       step);
    if (k % static_cast<std::size_t>(label_every) == 0 || fails)
      out += fmt::format("<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
                         "data-step=\"{}\">{}</text>",
                         x + kStepW / 2, kTopH - 16, step, step);
    if (fails)
      out += fmt::format("<a href=\"#bytes\"><text class=\"bad\" x=\"{}\" y=\"{}\" "
                         "text-anchor=\"middle\" fill=\"#b00020\" data-t=\"{}\">\u2717 first "
                         "difference</text></a>",
                         x + kStepW / 2, 10, escape(r.failure->text));
  }
  out += fmt::format("<text class=\"lbl\" x=\"4\" y=\"{}\">request \\ step</text>\n", kTopH - 16);
  for (std::size_t li = 0; li < lanes.drawn.size(); ++li) {
    const std::string& id = lanes.drawn[li];
    const int y = kTopH + static_cast<int>(li) * kLaneH;
    const auto alike = lanes.alike.find(id);
    const std::size_t more = alike == lanes.alike.end() ? 0 : alike->second.size();
    const bool bad = r.failure && r.failure->request == id;
    out += fmt::format("<text class=\"big\" x=\"4\" y=\"{}\"{}>{}</text>", y + 14,
                       bad ? " fill=\"#b00020\"" : "", escape(id.size() > 16 ? id.substr(0, 15) + "\u2026" : id));
    if (more > 0)
      out += fmt::format("<text class=\"lbl\" x=\"4\" y=\"{}\" data-t=\"{}\">+{} like this</text>",
                         y + 26, escape(fmt::format("{}", fmt::join(alike->second, " "))), more);
    const std::vector<Cell>& cells = t.cells.at(id);
    for (std::size_t k = 0; k < steps; ++k)
      out += cell_svg(cells[k], id, r.views[t.first + k].step,
                      kLaneLabelW + static_cast<int>(k) * kStepW + 1, y + 4);
    out += "\n";
  }
  return out + "</svg>\n";
}

// The rows of one step as block tables with the copies drawn (pre above, post below).
std::string step_tables(const StepView& v, const std::string& bad_request) {
  std::vector<TableRow> rows;
  std::int32_t width = 0;
  for (const RowView& r : v.rows) {
    if (rows.size() == kPanelRowsMax) break;
    TableRow t;
    t.label = {fmt::format("row {} \u00b7 {} ({})", r.batch_row, r.req_id, kind_of(r)),
               fmt::format("computed {}, sched {}, drafts {}, acc {}", r.computed_before,
                           r.scheduled, r.drafts, r.accepted),
               fmt::format("col {} -> {}, a {} -> {}",
                           r.state_col_before ? fmt::format("{}", *r.state_col_before) : "-",
                           r.state_col_after ? fmt::format("{}", *r.state_col_after) : "-",
                           r.num_accepted_before ? fmt::format("{}", *r.num_accepted_before) : "-",
                           r.num_accepted_after ? fmt::format("{}", *r.num_accepted_after) : "-")};
    t.css = r.req_id == bad_request ? "rowbad" : "";
    for (const auto& ids_of_group : r.table) {
      GroupRow g{.block_ids = ids_of_group};
      width = std::max(width, static_cast<std::int32_t>(ids_of_group.size()));
      const auto add = [&](const std::optional<harness::CopyView>& c, const char* css, bool below) {
        if (!c) return;
        g.arrows.push_back({.src_col = c->src_col,
                            .dst_col = c->dst_col,
                            .label = fmt::format("+{}", c->token_bias),
                            .css = css,
                            .below = below,
                            .tip = fmt::format("{} {}", below ? "post-copy" : "pre-copy",
                                               copy_text(c))});
      };
      add(r.pre_copy, "pre", false);
      add(r.post_copy, "post", true);
      t.groups.push_back(std::move(g));
    }
    rows.push_back(std::move(t));
  }
  std::string out = table_rows_svg(rows, width);
  if (v.rows.size() > rows.size())
    out += fmt::format("<p class=\"note\">{} more rows not drawn</p>\n", v.rows.size() - rows.size());
  return out;
}

std::string panels_html(const EngineReport& r, const Timeline& t) {
  const std::optional<std::size_t> failing = failing_index(r);
  const std::size_t initial = failing.value_or(t.end - 1);
  std::string out = fmt::format("<div data-initial-step=\"{}\"></div>\n", r.views[initial].step);
  for (std::size_t i = t.first; i < t.end; ++i) {
    const StepView& v = r.views[i];
    std::string text = harness::explain(v);
    if (text.size() > kExplainCharsMax)
      text = text.substr(0, kExplainCharsMax) +
             fmt::format("\n... (cut; `replay --explain {}` prints it whole)\n", v.step);
    out += fmt::format("<div class=\"steppanel\" data-step=\"{}\" id=\"step-{}\">\n<h3>step {}{}"
                       "</h3>\n",
                       v.step, v.step, v.step, failing && *failing == i ? " (the first difference)" : "");
    if (i == initial)
      out += step_tables(v, r.failure ? r.failure->request : "");
    out += fmt::format("<pre>{}</pre>\n</div>\n", escape(text));
  }
  return out;
}

constexpr LegendItem kEngineLegend[] = {
    {"prefill", "prefill or chunk (scheduled tokens)"},
    {"decode", "decode (accepted/drafts below)"},
    {"idle", "not scheduled"},
    {"hit", "prefix hit"},
    {"resume", "resumed"},
    {"preempt", "preempted (\u2715)"},
    {"finish", "finished"},
    {"alloc", "+n blocks allocated"},
    {"free", "-n blocks freed"},
    {"failcol", "first step where oracle and backend disagree (or an invariant broke)"},
    {"be", "expected byte that differs"},
    {"ba", "actual byte that differs"},
    {"bp", "actual byte still poison"},
};

} // namespace

std::string engine_report_html(const EngineReport& r) {
  std::string body = header_html(r.header);
  body += legend_html(kEngineLegend);
  body += "<p class=\"note\">arrows over a cell: <span style=\"color:#1f5fbf\">pre-step copy</span>"
          "; under it: <span style=\"color:#8e24aa\">post-step copy</span>. Click a step for what "
          "the oracle believes happened there.</p>\n";
  if (r.views.empty()) {
    body += "<p class=\"bad\">no step ran</p>\n";
    return page_html(r.header.title, body);
  }
  const Timeline t = build_timeline(r);
  const Lanes lanes = pick_lanes(t, r);
  body += fmt::format("<h2 id=\"timeline\">Timeline</h2>\n<p>{} steps{}, {} requests ({} lanes "
                      "drawn){}</p>\n",
                      r.views.size(),
                      t.first > 0 || t.end < r.views.size()
                          ? fmt::format(" (drawn: steps {} to {})", r.views[t.first].step,
                                        r.views[t.end - 1].step)
                          : "",
                      t.lanes.size(), lanes.drawn.size(),
                      lanes.not_drawn > 0
                          ? fmt::format("; {} lanes of other behaviours not drawn", lanes.not_drawn)
                          : "");
  body += "<div style=\"overflow-x:auto\">" + timeline_svg(r, t, lanes) + "</div>\n";
  body += "<h2 id=\"steps\">Step</h2>\n" + panels_html(r, t);
  body += "<h2 id=\"failure\">Outcome</h2>\n";
  body += fmt::format("<p class=\"{}\">{}</p>\n", r.failure ? "bad" : "note", escape(r.outcome));
  body += "<h2 id=\"bytes\">Byte view</h2>\n";
  if (r.finding_block) {
    ArenaDiff one;
    one.blocks.push_back(*r.finding_block);
    one.blocks_differing = 1;
    body += fmt::format("<p>the block the oracle's check names, as the oracle holds it after step "
                        "{} (what it should hold: {})</p>\n",
                        r.failure->step, escape(r.failure->text));
    body += byte_grids_html(r.layout, one, "oracle (this block)", "oracle (this block)", "bytes");
  } else if (r.failure) {
    body += byte_grids_html(r.layout, r.bytes, "expected (oracle)", "actual (" + r.actual_name + ")",
                            "bytes");
  } else {
    body += "<p class=\"note\">every step held: no bytes differ</p>\n";
  }
  return page_html(r.header.title, body);
}

} // namespace mc::show
