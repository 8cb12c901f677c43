#include "cli/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace mc::cli {
namespace {

// "45 s", "12m05s", "3h02m".
std::string duration_text(double seconds) {
  const auto s = static_cast<std::int64_t>(std::max(seconds, 0.0));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

} // namespace

Progress::Progress(std::string what, std::int64_t total, double budget_seconds)
    : what_(std::move(what)), total_(total), budget_seconds_(budget_seconds),
      enabled_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::tick(const std::string& detail) {
  ++count_;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200) && count_ != total_) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(count_) / elapsed : 0.0;
  const std::string of = total_ > 0 ? fmt::format("/{}", total_) : "";
  std::string extra;
  if (findings_ > 0) extra += fmt::format(", {} finding{}", findings_, findings_ == 1 ? "" : "s");
  if (budget_seconds_ > 0)
    extra += fmt::format(", {} left", duration_text(budget_seconds_ - elapsed));
  std::fprintf(stderr, "\r%s",
               fmt::format("{}: {}{} ({:.1f}/s, {:.1f} s{}) {:<40}", what_, count_, of, rate,
                           elapsed, extra, detail.substr(0, 40))
                   .c_str());
  std::fflush(stderr);
  line_open_ = true;
}

void Progress::done() {
  if (line_open_) std::fprintf(stderr, "\n");
  line_open_ = false;
}

} // namespace mc::cli
