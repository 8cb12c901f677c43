// Page skeleton, escaping, header and legend (html.h).
#include "show/html.h"

#include <fmt/format.h>

namespace mc::show {
namespace {

// One stylesheet for every picture: the classes the renderers put on SVG shapes and HTML.
constexpr std::string_view kStyle = R"(
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 6px}h3{font-size:13px;margin:10px 0 4px}
dl.hdr{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:0 0 8px}
dl.hdr dt{font-weight:600}dl.hdr dd{margin:0}
code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f6f6f6;padding:6px;overflow:auto;max-height:420px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:6px 0 10px}
.legend span{display:inline-flex;align-items:center;gap:4px}
.note{color:#555}.bad{color:#b00020;font-weight:600}
svg text{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:10px}
svg .lbl{fill:#444}svg .big{font-size:11px;fill:#222}
.blk{fill:#e8eefc;stroke:#7d8fb8}.null{fill:#cfcfcf;stroke:#888}.pad{fill:#fff;stroke:#aaa;stroke-dasharray:3 2}
.gap{fill:#f4f4f4;stroke:#ccc}.alias{stroke:#e07b00;stroke-width:2.5}.shared{fill:#fde3c8}
.src{fill:#cfe8cf}.dst{fill:#fff2b3}.rowbad{fill:#fde0e0}.rowalias{fill:#fff1e0}.rowok{fill:none}
.arr{fill:none;stroke-width:1.8}.exp{stroke:#1b7f3b}.act{stroke:#c62828;stroke-dasharray:5 3}
.pre{stroke:#1f5fbf}.post{stroke:#8e24aa}
.b{fill:#f3f3f3;stroke:#fff}.be{fill:#f5b041;stroke:#fff}.ba{fill:#e53935;stroke:#fff}.bp{fill:#bdbdbd;stroke:#fff}
.prefill{fill:#bcd4f6}.decode{fill:#c8e6c9}.idle{fill:#f7f7f7}.failcol{fill:#ffcdd2}.selcol{fill:#fff59d}
.preempt{fill:#c62828}.resume{fill:#2e7d32}.hit{fill:#6a1b9a}.finish{fill:#424242}.alloc{fill:#1565c0}.free{fill:#ef6c00}
.stepcol{fill:#fafafa;cursor:pointer}.stepcol:hover{fill:#fffde7}.stepcol.failcol{fill:#ffcdd2}.stepcol.selcol{fill:#fff59d}
.steppanel{display:none}.steppanel.on{display:block}
#tip{position:fixed;pointer-events:none;background:#333;color:#fff;padding:3px 6px;border-radius:3px;font:11px ui-monospace,monospace;display:none;white-space:pre;z-index:9}
)";

// Hover: shapes with a data-t attribute show it; byte grids hold their bytes as hex in
// data-e/data-a and name the element under the pointer. Steps: a click on a step column of
// the timeline shows that step's panel.
constexpr std::string_view kScript = R"(
(function(){
var tip=document.getElementById('tip');
function show(ev,t){tip.textContent=t;tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';}
document.addEventListener('mousemove',function(ev){
 var el=ev.target;
 if(el&&el.getAttribute&&el.getAttribute('data-t')){show(ev,el.getAttribute('data-t'));return;}
 var g=el&&el.closest?el.closest('g.grid'):null;
 if(g&&el.hasAttribute('data-i')){
  var i=+el.getAttribute('data-i'),w=+g.getAttribute('data-w'),n=+g.getAttribute('data-n');
  var e=g.getAttribute('data-e').substr(i*n*2,n*2),a=g.getAttribute('data-a').substr(i*n*2,n*2);
  var r=+g.getAttribute('data-r0')+Math.floor(i/w),c=+g.getAttribute('data-c0')+i%w,fw=g.getAttribute('data-fw');
  var at=fw?'element '+(r*fw+c):g.getAttribute('data-rl')+' '+r+', '+g.getAttribute('data-cl')+' '+c;
  show(ev,at+'\nexpected '+e+'\nactual   '+a);return;}
 tip.style.display='none';
});
function select(s){
 document.querySelectorAll('.steppanel').forEach(function(p){p.classList.toggle('on',p.getAttribute('data-step')===s);});
 document.querySelectorAll('rect.stepcol').forEach(function(r){r.classList.toggle('selcol',r.getAttribute('data-step')===s);});
}
document.addEventListener('click',function(ev){
 var el=ev.target&&ev.target.closest?ev.target.closest('svg [data-step]'):null;
 if(el)select(el.getAttribute('data-step'));
});
var first=document.querySelector('[data-initial-step]');
if(first)select(first.getAttribute('data-initial-step'));
})();
)";

// Arrowheads, one per arrow colour, defined once for every SVG of the page.
constexpr std::string_view kMarkers =
    "<svg width=\"0\" height=\"0\" style=\"position:absolute\"><defs>"
    "<marker id=\"ah-exp\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" "
    "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#1b7f3b\"/></marker>"
    "<marker id=\"ah-act\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" "
    "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#c62828\"/></marker>"
    "<marker id=\"ah-pre\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" "
    "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#1f5fbf\"/></marker>"
    "<marker id=\"ah-post\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" "
    "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#8e24aa\"/></marker>"
    "</defs></svg>\n";

} // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default:
      if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t')
        out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
      else
        out += ch;
    }
  }
  return out;
}

std::string header_html(const Header& h) {
  std::string out = fmt::format("<h1>{}</h1>\n<dl class=\"hdr\">\n", escape(h.title));
  const auto field = [&out](std::string_view name, const std::string& value, bool mono) {
    if (value.empty()) return;
    out += fmt::format("<dt>{}</dt><dd{}>{}</dd>\n", name, mono ? " class=\"mono\"" : "",
                       escape(value));
  };
  field("source", h.source, true);
  field("failure", h.failure, false);
  field("signature", h.signature, true);
  field("rate", h.rate, false);
  field("reproduce", h.reproduce, true);
  out += "</dl>\n";
  if (!h.note.empty()) out += fmt::format("<p class=\"note\">{}</p>\n", escape(h.note));
  return out;
}

std::string legend_html(std::span<const LegendItem> items) {
  std::string out = "<div class=\"legend\" id=\"legend\"><b>legend</b>";
  for (const LegendItem& item : items)
    out += fmt::format("<span><svg width=\"16\" height=\"12\"><rect class=\"{}\" x=\"1\" y=\"1\" "
                       "width=\"14\" height=\"10\"/></svg>{}</span>",
                       item.css_class, escape(item.text));
  return out + "</div>\n";
}

std::string page_html(std::string_view title, std::string_view body) {
  return fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                     "<title>{}</title>\n<style>{}</style></head>\n<body>\n{}{}<div id=\"tip\">"
                     "</div>\n<script>{}</script>\n</body></html>\n",
                     escape(title), kStyle, kMarkers, body, kScript);
}

std::string ranges_text(std::span<const std::int64_t> values, std::size_t shown_max) {
  std::string out;
  std::size_t pieces = 0;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1)
      ++j;
    if (pieces == shown_max) return out + ", ...";
    out += (out.empty() ? "" : ", ") + (j == i ? fmt::format("{}", values[i])
                                               : fmt::format("{}-{}", values[i], values[j]));
    ++pieces;
    i = j + 1;
  }
  return out;
}

} // namespace mc::show
