// This process's CPU time, for benchmarks and speed tests: on a shared machine the wall clock
// says more about the neighbours than about the code.
#pragma once

#include <sys/resource.h>

namespace mc::model {

struct CpuSeconds {
  double user = 0.0;
  double system = 0.0;
  double total() const { return user + system; }
};

// The CPU seconds this process has used so far (getrusage).
inline CpuSeconds cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return {.user = seconds(usage.ru_utime), .system = seconds(usage.ru_stime)};
}

} // namespace mc::model
