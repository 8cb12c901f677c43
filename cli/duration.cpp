#include "cli/duration.h"

#include "model/errors.h"

#include <exception>

namespace mc::cli {

double parse_duration_option(std::string_view option, const std::string& text) {
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    model::fail_input("{}: expected a duration like 90s, 15m or 2h, got '{}'", option, text);
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1.0
                       : unit == "m"               ? 60.0
                       : unit == "h"               ? 3600.0
                                                   : -1.0;
  // A year bounds what a campaign may be asked to run; "inf" and overflowing numbers are typos.
  constexpr double kSecondsMax = 366.0 * 24 * 3600;
  if (scale < 0 || !(value > 0) || !(value * scale <= kSecondsMax))
    model::fail_input("{}: expected a positive duration up to a year, like 90s, 15m or 2h, got "
                      "'{}'",
                      option, text);
  return value * scale;
}

} // namespace mc::cli
