// IsolatedPool: children run `jobs` at a time and their outcomes come back in the order they
// were started, whatever order they finish in; a child that crashes or runs past its timeout is
// its own outcome and costs the others nothing; cleared children are killed.
#include "fuzz/isolate_pool.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps `millis`, then returns `text`.
IsolatedWork after(int millis, std::string text) {
  return [millis, text] {
    std::this_thread::sleep_for(std::chrono::milliseconds(millis));
    return text;
  };
}

TEST(IsolatedPool, OutcomesComeInStartOrderWhateverOrderChildrenFinishIn) {
  IsolatedPool pool(3);
  const int millis[] = {300, 10, 150, 1, 60};
  std::vector<std::string> taken;
  std::size_t started = 0;
  while (started < std::size(millis) || !pool.empty()) {
    while (started < std::size(millis) && pool.has_room()) {
      pool.start(after(millis[started], "case " + std::to_string(started)), {});
      ++started;
    }
    if (!pool.oldest_done()) {
      pool.wait();
      continue;
    }
    const IsolatedOutcome out = pool.take_oldest();
    ASSERT_TRUE(out.returned()) << out.message;
    taken.push_back(out.payload);
  }
  EXPECT_EQ(taken, (std::vector<std::string>{"case 0", "case 1", "case 2", "case 3", "case 4"}));
}

TEST(IsolatedPool, RunsJobsChildrenAtOnceAndNoMore) {
  IsolatedPool pool(2);
  pool.start(after(400, "a"), {});
  EXPECT_TRUE(pool.has_room());
  pool.start(after(400, "b"), {});
  EXPECT_FALSE(pool.has_room());
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(pool.take_oldest().payload, "a");
  EXPECT_EQ(pool.take_oldest().payload, "b");
  // Side by side: about 400 ms for both, not 800.
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(750));
  EXPECT_TRUE(pool.empty());
}

TEST(IsolatedPool, FinishedChildrenLeaveRoomBehindASlowOldOne) {
  IsolatedPool pool(2);
  pool.start(after(500, "slow"), {});
  pool.start(after(1, "quick"), {});
  while (!pool.has_room())
    pool.wait();
  EXPECT_FALSE(pool.oldest_done());
  pool.start(after(1, "next"), {});
  EXPECT_EQ(pool.take_oldest().payload, "slow");
  EXPECT_EQ(pool.take_oldest().payload, "quick");
  EXPECT_EQ(pool.take_oldest().payload, "next");
}

TEST(IsolatedPool, ACrashAndATimeoutAreOutcomesOfTheirOwn) {
  IsolatedPool pool(3);
  pool.start([]() -> std::string { std::abort(); }, {});
  pool.start(after(5000, "late"), IsolateOptions{.timeout_seconds = 0.2});
  pool.start(after(20, "fine"), {});
  const IsolatedOutcome crashed = pool.take_oldest();
  EXPECT_EQ(crashed.end, IsolatedEnd::signaled);
  EXPECT_EQ(crashed.signal, SIGABRT);
  const IsolatedOutcome late = pool.take_oldest();
  EXPECT_EQ(late.end, IsolatedEnd::timed_out);
  EXPECT_EQ(late.message, "exceeded 0.2 s; killed");
  const IsolatedOutcome fine = pool.take_oldest();
  ASSERT_TRUE(fine.returned()) << fine.message;
  EXPECT_EQ(fine.payload, "fine");
}

TEST(IsolatedPool, SettleWaitsForEveryChild) {
  IsolatedPool pool(3);
  for (int i = 0; i < 3; ++i)
    pool.start(after(50 * (3 - i), std::to_string(i)), {});
  EXPECT_FALSE(pool.has_room());
  pool.settle();
  EXPECT_TRUE(pool.has_room()); // none running: all three are done
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(pool.oldest_done());
    EXPECT_EQ(pool.take_oldest().payload, std::to_string(i));
  }
}

TEST(IsolatedPool, ClearKillsTheChildrenStillRunning) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  IsolatedPool pool(2);
  // The child writes its pid, then sleeps far longer than the test.
  pool.start(
      [fd = pipe_fds[1]] {
        const pid_t pid = getpid();
        (void)!write(fd, &pid, sizeof pid);
        std::this_thread::sleep_for(std::chrono::seconds(60));
        return std::string("unreachable");
      },
      {});
  close(pipe_fds[1]);
  pid_t child = 0;
  ASSERT_EQ(read(pipe_fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  close(pipe_fds[0]);
  ASSERT_EQ(kill(child, 0), 0);
  const Clock::time_point start = Clock::now();
  pool.clear();
  EXPECT_TRUE(pool.empty());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(kill(child, 0), -1); // killed and reaped: no such process
}

} // namespace
} // namespace mc::fuzz
