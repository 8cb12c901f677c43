// Streaming: a 1,000,000-step trace is written and read back with memory that does not grow
// with the trace (the reader keeps one line and the live requests). Prints steps/s of both.
//
// Under AddressSanitizer the resident size says nothing (its quarantine keeps up to 256 MiB of
// freed blocks mapped) and the run is ~40x slower, so a sanitized build streams 50,000 steps
// and checks the live heap instead, which the sanitizer's allocator counts exactly.
#include "model/cpu_time.h"
#include "scenarios/trace.h"
#include "trace_fixtures.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define MC_TRACE_STREAM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MC_TRACE_STREAM_ASAN 1
#endif
#endif
#ifdef MC_TRACE_STREAM_ASAN
// From the sanitizer runtime (sanitizer/allocator_interface.h, not installed with every gcc).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

#include <chrono>
#include <cstddef>
#include <fstream>
#include <string>

namespace mc::scenarios {
namespace {

#ifdef MC_TRACE_STREAM_ASAN
constexpr std::int64_t kSteps = 50'000;
#else
constexpr std::int64_t kSteps = 1'000'000;
#endif
constexpr std::int64_t kWarmupSteps = 1'000;
constexpr std::int64_t kGrowthBytesMax = std::int64_t{4} << 20;

// "r" + std::to_string(k) trips gcc 12's -Wrestrict false positive at -O3 (GCC bug 105329).
std::string request_id(std::int64_t k) {
  std::string id = "r";
  id += std::to_string(k);
  return id;
}

// Request k arrives at step 2k with a 3-token prompt, decodes with one draft at step 2k+1
// and is listed as finished at step 2k+2: at most two requests are live at any time.
model::Step synthetic_step(std::int64_t s) {
  model::Step step{.index = s};
  const std::int64_t k = s / 2;
  const std::string id = request_id(k);
  const auto t = static_cast<std::int32_t>(k % 30000);
  if (s % 2 == 0) {
    const auto b = static_cast<std::int32_t>(1 + (k % 10) * 3);
    step.new_requests.push_back(
        {.req_id = id, .prompt_token_ids = {t, t + 1, t + 2}, .block_ids = {{b, b + 1, b + 2}}});
    step.scheduled.push_back(
        {.req_id = id, .num_scheduled_tokens = 3, .token_ids = {t, t + 1, t + 2}});
    if (k > 0) step.finished_req_ids.push_back(request_id(k - 1));
  } else {
    step.cached_requests.push_back({.req_id = id, .new_block_ids = {{}}, .num_computed_tokens = 3});
    step.scheduled.push_back({.req_id = id,
                              .num_scheduled_tokens = 2,
                              .num_draft_tokens = 1,
                              .token_ids = {t + 3, t + 4},
                              .num_accepted_tokens = 1 + static_cast<std::int32_t>(k % 2)});
  }
  return step;
}

std::int64_t max_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
}

#ifdef MC_TRACE_STREAM_ASAN
// Bytes handed out by malloc and not yet freed (quarantined blocks excluded).
std::int64_t live_heap_bytes() {
  return static_cast<std::int64_t>(__sanitizer_get_current_allocated_bytes());
}
#endif

std::int64_t current_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      std::int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(TraceStream, MillionStepsWithFlatMemory) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("mc_trace_stream_" + std::to_string(::getpid()));
  auto start = std::chrono::steady_clock::now();
  double cpu_start = model::cpu_seconds().total();
  {
    TraceWriter writer(file, testing::mamba2_header());
    for (std::int64_t s = 0; s < kSteps; ++s)
      writer.write(synthetic_step(s));
  }
  const double write_s = seconds_since(start);
  const double write_cpu_s = model::cpu_seconds().total() - cpu_start;

  TraceReader reader(file);
  std::int64_t steps = 0;
  std::size_t live_max = 0;
  const auto read_some = [&](std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::optional<model::Step> step = reader.next();
      if (!step) return;
      ASSERT_EQ(step->index, steps);
      ++steps;
      live_max = std::max(live_max, reader.num_live_requests());
    }
  };
  read_some(kWarmupSteps);
  const std::int64_t max_rss_before = max_rss_bytes();
  const std::int64_t rss_before = current_rss_bytes();
#ifdef MC_TRACE_STREAM_ASAN
  const std::int64_t heap_before = live_heap_bytes();
#endif
  start = std::chrono::steady_clock::now();
  cpu_start = model::cpu_seconds().total();
  read_some(kSteps); // the rest, and one call that sees the end
  const double read_s = seconds_since(start);
  const double read_cpu_s = model::cpu_seconds().total() - cpu_start;
  const std::int64_t max_rss_growth = max_rss_bytes() - max_rss_before;
  const std::int64_t rss_growth = current_rss_bytes() - rss_before;
  const auto file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(file));
  std::filesystem::remove(file);

  EXPECT_EQ(steps, kSteps);
  EXPECT_LE(live_max, 2u);
#ifdef MC_TRACE_STREAM_ASAN
  const std::int64_t heap_growth = live_heap_bytes() - heap_before;
  EXPECT_LT(heap_growth, kGrowthBytesMax);
  std::printf("live heap growth %lld KiB (AddressSanitizer build: RSS not checked)\n",
              static_cast<long long>(heap_growth / 1024));
#else
  EXPECT_LT(max_rss_growth, kGrowthBytesMax);
  EXPECT_LT(rss_growth, kGrowthBytesMax);
#endif
  const double write_rate = static_cast<double>(kSteps) / write_s;
  const auto read_steps = static_cast<double>(kSteps - kWarmupSteps);
  const double read_rate = read_steps / read_s;
  std::printf("trace stream: %lld steps, %.1f MiB\n  write: %.0f steps/s wall, %.0f steps per "
              "CPU second (one flush per line)\n  read:  %.0f steps/s wall, %.0f steps per CPU "
              "second\n  max RSS growth %lld KiB, RSS growth %lld KiB\n",
              static_cast<long long>(kSteps), static_cast<double>(file_bytes) / (1 << 20),
              write_rate, static_cast<double>(kSteps) / write_cpu_s, read_rate,
              read_steps / read_cpu_s, static_cast<long long>(max_rss_growth / 1024),
              static_cast<long long>(rss_growth / 1024));
  RecordProperty("read_steps_per_s", static_cast<int>(read_rate));
  RecordProperty("write_steps_per_s", static_cast<int>(write_rate));
}

} // namespace
} // namespace mc::scenarios
