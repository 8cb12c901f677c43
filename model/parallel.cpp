#include "model/parallel.h"

#include "model/errors.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace mc::model {
namespace {

std::atomic<std::int64_t> g_threads{1};
std::atomic<std::int64_t> g_bytes_min{std::int64_t{8} << 20};

} // namespace

std::int64_t work_threads() {
  return g_threads.load(std::memory_order_relaxed);
}

void set_work_threads(std::int64_t threads) {
  MC_ASSERT(threads >= 1);
  g_threads.store(std::min(threads, kWorkThreadsMax), std::memory_order_relaxed);
}

std::int64_t parallel_bytes_min() {
  return g_bytes_min.load(std::memory_order_relaxed);
}

void set_parallel_bytes_min_for_testing(std::int64_t bytes) {
  g_bytes_min.store(bytes, std::memory_order_relaxed);
}

void run_parts(std::int64_t work_bytes,
               const std::function<void(std::int64_t part, std::int64_t parts)>& body) {
  const std::int64_t parts = work_bytes >= parallel_bytes_min() ? work_threads() : 1;
  if (parts == 1) return body(0, 1);
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(parts));
  const auto run = [&](std::int64_t part) {
    try {
      body(part, parts);
    } catch (...) {
      failed[static_cast<std::size_t>(part)] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> others;
    others.reserve(static_cast<std::size_t>(parts - 1));
    std::vector<std::int64_t> here{0}; // parts the calling thread runs
    for (std::int64_t part = 1; part < parts; ++part) {
      try {
        others.emplace_back(run, part);
      } catch (const std::system_error&) { // no thread to be had: the work is still done
        here.push_back(part);
      }
    }
    for (const std::int64_t part : here)
      run(part);
  } // joined
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

} // namespace mc::model
