// A progress line for long runs: shown on a terminal (stderr), silent otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mc::cli {

class Progress {
public:
  // total <= 0: unknown. budget_seconds > 0: the line shows the time left of it.
  Progress(std::string what, std::int64_t total, double budget_seconds = 0.0);
  // Counts one item; redraws at most a few times a second.
  void tick(const std::string& detail = {});
  // Findings so far, shown from the first on.
  void set_findings(std::int64_t findings) { findings_ = findings; }
  // Ends the drawn line (other output may follow); a later tick draws a new one.
  void done();

private:
  std::string what_;
  std::int64_t total_ = 0;
  double budget_seconds_ = 0.0;
  std::int64_t count_ = 0;
  std::int64_t findings_ = 0;
  bool enabled_ = false;
  bool line_open_ = false; // a line is drawn and not yet ended
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

} // namespace mc::cli
