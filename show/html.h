// The pieces every picture of `mambacheck show` is made of: one self-contained HTML page
// (inline CSS, inline SVG, a few lines of plain JavaScript for hover and step selection; no
// network, no framework), text escaping, the legend and the header block naming the failure,
// its signature, its rate over reruns and the command that reproduces it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mc::show {

// Text for HTML and SVG content and attribute values: & < > " ' escaped, control characters
// other than newline and tab shown as \xNN so a hostile name in a trace cannot break the page.
std::string escape(std::string_view text);

// What the header of a report says; empty fields are left out.
struct Header {
  std::string title;      // "kernel counterexample: postprocess_align, 3 rows"
  std::string source;     // the file or directory shown
  std::string failure;    // the first difference, one line
  std::string signature;  // the campaign's signature
  std::string rate;       // "failed 5 of 5 runs (deterministic)": the nondeterminism rate
  std::string reproduce;  // the command that reproduces it
  std::string note;       // anything the reader must know (the backend was not run, ...)
};

std::string header_html(const Header& header);

struct LegendItem {
  std::string_view css_class; // the swatch's class (a rect of the pictures)
  std::string_view text;
};
std::string legend_html(std::span<const LegendItem> items);

// The whole page around `body`.
std::string page_html(std::string_view title, std::string_view body);

// "3, 5-9, 12": sorted distinct values as ranges, at most `shown_max` pieces then "...".
std::string ranges_text(std::span<const std::int64_t> sorted_values, std::size_t shown_max = 12);

} // namespace mc::show
