#include "cli/progress.h"

#include <fmt/format.h>

#include <cstdio>
#include <unistd.h>

namespace mc::cli {

Progress::Progress(std::string what, std::int64_t total)
    : what_(std::move(what)), total_(total), enabled_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::tick(const std::string& detail) {
  ++count_;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200) && count_ != total_) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(count_) / elapsed : 0.0;
  const std::string of = total_ > 0 ? fmt::format("/{}", total_) : "";
  std::fprintf(stderr, "\r%s",
               fmt::format("{}: {}{} ({:.1f}/s, {:.1f} s) {:<40}", what_, count_, of, rate, elapsed,
                           detail.substr(0, 40))
                   .c_str());
  std::fflush(stderr);
  line_open_ = true;
}

void Progress::done() {
  if (line_open_) std::fprintf(stderr, "\n");
  line_open_ = false;
}

} // namespace mc::cli
