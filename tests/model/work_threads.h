// Sets model/parallel.h's threads and threshold for one test and puts the process's back after
// it, also when the test fails.
#pragma once

#include "model/parallel.h"

#include <cstdint>

namespace mc::model::test {

class WorkThreads {
public:
  WorkThreads(std::int64_t threads, std::int64_t bytes_min)
      : threads_(work_threads()), bytes_min_(parallel_bytes_min()) {
    set_work_threads(threads);
    set_parallel_bytes_min_for_testing(bytes_min);
  }
  ~WorkThreads() {
    set_work_threads(threads_);
    set_parallel_bytes_min_for_testing(bytes_min_);
  }
  WorkThreads(const WorkThreads&) = delete;
  WorkThreads& operator=(const WorkThreads&) = delete;

private:
  std::int64_t threads_;
  std::int64_t bytes_min_;
};

} // namespace mc::model::test
