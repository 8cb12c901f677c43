// CaseWorkerPool with a stub worker (case_worker_stub.cpp): cases go to `jobs` workers at once
// and their outcomes come back in case order whatever order they finish in; a worker that
// crashes, runs past its timeout or asks to retire is replaced by a fresh process, and the
// case's outcome says what happened as a forked child's would; a throw is an outcome and the
// worker stays; a worker that cannot go on is an environment error; cleared cases' workers are
// killed; each worker gets its own environment; a worker finishes its case through SIGINT.
#include "fuzz/case_workers.h"
#include "model/errors.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

CaseWorkerStart stub(const std::vector<std::string>& plan, double timeout_seconds = 0) {
  CaseWorkerStart start;
  start.command = {MC_CASE_WORKER_STUB, "case-worker"};
  start.setup["plan"] = plan;
  start.options.timeout_seconds = timeout_seconds;
  return start;
}

// "case I pid P" -> P
std::string pid_of(const std::string& payload) {
  return payload.substr(payload.find(" pid ") + 5);
}

// The processes this test started (the pool's workers), from /proc.
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid() && state != 'Z') out.push_back(std::stoi(name));
  }
  return out;
}

std::vector<std::string> run_all(CaseWorkerPool& pool, std::int64_t cases) {
  std::vector<std::string> taken;
  std::int64_t started = 0;
  while (started < cases || !pool.empty()) {
    while (started < cases && pool.has_room())
      pool.start(started++);
    if (!pool.oldest_done()) {
      pool.wait();
      continue;
    }
    const IsolatedOutcome out = pool.take_oldest();
    taken.push_back(out.returned() ? out.payload.substr(0, out.payload.find(" pid "))
                                   : "failed: " + out.message);
  }
  return taken;
}

TEST(CaseWorkers, OutcomesComeInCaseOrderWhateverOrderWorkersFinishIn) {
  CaseWorkerPool pool(stub({"ok:300", "ok:10", "ok:150", "ok:1", "ok:60"}), 3);
  EXPECT_EQ(run_all(pool, 5),
            (std::vector<std::string>{"case 0", "case 1", "case 2", "case 3", "case 4"}));
  EXPECT_EQ(pool.workers_started(), 3);
}

TEST(CaseWorkers, RunsJobsCasesAtOnceOnWorkersThatStay) {
  CaseWorkerPool pool(stub({"ok:400"}), 2);
  const Clock::time_point start = Clock::now();
  pool.start(0);
  pool.start(1); // the idle worker gets it
  // Each worker takes one more, waiting in its input, and no more.
  pool.start(2);
  pool.start(3);
  EXPECT_FALSE(pool.has_room());
  pool.clear();
  pool.start(0);
  pool.start(1);
  const IsolatedOutcome a = pool.take_oldest();
  const IsolatedOutcome b = pool.take_oldest();
  // Side by side: about 400 ms for both, not 800 (and not two starts of a process more).
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(750));
  ASSERT_TRUE(a.returned() && b.returned()) << a.message << b.message;
  EXPECT_NE(pid_of(a.payload), pid_of(b.payload));
  pool.start(2);
  const IsolatedOutcome c = pool.take_oldest();
  ASSERT_TRUE(c.returned()) << c.message;
  // The two cleared workers were killed; the two that ran cases 0 and 1 still run case 2.
  EXPECT_TRUE(pid_of(c.payload) == pid_of(a.payload) || pid_of(c.payload) == pid_of(b.payload));
  EXPECT_EQ(pool.workers_started(), 4);
}

// While a slow case runs, the other worker goes on through many more cases than a handful: the
// outcomes may wait behind it, in case order, far past two a job. Kernel case times have a
// heavy tail, and a short window held 16 workers to 8x one.
TEST(CaseWorkers, ASlowCaseDoesNotHoldTheOtherWorkersBack) {
  std::vector<std::string> plan(300, "ok:1");
  plan[0] = "ok:3000";
  CaseWorkerPool pool(stub(plan), 2);
  std::int64_t started = 0;
  while (!pool.oldest_done()) {
    while (started < std::ssize(plan) && pool.has_room())
      pool.start(started++);
    pool.wait();
  }
  // Case 0 and the case queued behind it on its worker ran there; the other worker got through
  // most of the rest (the old window of 8 a job would have stopped at 16 cases started).
  EXPECT_GE(started, 150);
  std::int64_t taken = 0;
  while (taken < std::ssize(plan)) {
    while (started < std::ssize(plan) && pool.has_room())
      pool.start(started++);
    const IsolatedOutcome out = pool.take_oldest();
    ASSERT_TRUE(out.returned()) << out.message;
    EXPECT_EQ(out.payload.substr(0, out.payload.find(" pid ")), fmt::format("case {}", taken));
    ++taken;
  }
  EXPECT_EQ(taken, std::ssize(plan));
}

TEST(CaseWorkers, ACaseWaitingBehindACrashRunsOnTheWorkerThatReplacesIt) {
  CaseWorkerPool pool(stub({"segv", "ok:1", "ok:5000", "ok:1", "retire", "ok:1"}, 1.0), 1);
  // Case 1 waits in the input of the worker that dies on case 0; case 3 in that of the one
  // that runs past its timeout on case 2; case 5 in that of the one that retires after case 4.
  std::vector<std::string> pids;
  for (std::int64_t i = 0; i < 6; i += 2) {
    pool.start(i);
    pool.start(i + 1);
    EXPECT_FALSE(pool.has_room());
    const IsolatedOutcome first = pool.take_oldest();
    const IsolatedOutcome second = pool.take_oldest();
    ASSERT_TRUE(second.returned()) << i << ": " << second.message;
    EXPECT_EQ(second.payload.substr(0, 6), "case " + std::to_string(i + 1));
    if (i == 0) {
      EXPECT_EQ(first.signal, SIGSEGV);
    }
    if (i == 2) {
      EXPECT_EQ(first.message, "exceeded 1 s; killed");
    }
    if (i == 4) {
      ASSERT_TRUE(first.returned()) << first.message;
      EXPECT_NE(pid_of(first.payload), pid_of(second.payload));
    }
  }
  EXPECT_EQ(pool.workers_started(), 4);
}

TEST(CaseWorkers, ACrashIsItsCaseOutcomeAndAFreshWorkerTakesOver) {
  CaseWorkerPool pool(stub({"ok:1", "segv", "ok:1"}), 1);
  pool.start(0);
  const IsolatedOutcome first = pool.take_oldest();
  pool.start(1);
  const IsolatedOutcome crashed = pool.take_oldest();
  pool.start(2);
  const IsolatedOutcome after = pool.take_oldest();
  ASSERT_TRUE(first.returned() && after.returned()) << first.message << after.message;
  EXPECT_EQ(crashed.end, IsolatedEnd::signaled);
  EXPECT_EQ(crashed.signal, SIGSEGV);
  EXPECT_TRUE(std::regex_match(crashed.message,
                               std::regex("killed by SIGSEGV \\(invalid memory reference\\) at "
                                          "address 0x[0-9a-f]+ \\(0 bytes past the end of stub "
                                          "buffer\\)")))
      << crashed.message;
  EXPECT_NE(pid_of(after.payload), pid_of(first.payload));
  EXPECT_EQ(pool.workers_started(), 2);
}

TEST(CaseWorkers, ACaseRunningPastItsTimeoutIsKilledWithItsWorker) {
  CaseWorkerPool pool(stub({"ok:5000", "ok:1"}, 0.3), 1);
  const Clock::time_point start = Clock::now();
  pool.start(0);
  const IsolatedOutcome late = pool.take_oldest();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(late.end, IsolatedEnd::timed_out);
  EXPECT_EQ(late.message, "exceeded 0.3 s; killed");
  pool.start(1);
  const IsolatedOutcome next = pool.take_oldest();
  ASSERT_TRUE(next.returned()) << next.message;
  EXPECT_EQ(next.payload.substr(0, 6), "case 1");
  EXPECT_EQ(pool.workers_started(), 2);
}

TEST(CaseWorkers, AThrowIsItsCaseOutcomeAndTheWorkerStays) {
  CaseWorkerPool pool(stub({"ok:1", "throw", "ok:1"}), 1);
  EXPECT_EQ(run_all(pool, 3),
            (std::vector<std::string>{"case 0", "failed: threw: boom", "case 2"}));
  EXPECT_EQ(pool.workers_started(), 1);
}

TEST(CaseWorkers, ProgressAndStderrComeBackWithACrash) {
  CaseWorkerPool pool(stub({"steps:3", "stderr-abort"}), 1);
  pool.start(0);
  const IsolatedOutcome steps = pool.take_oldest();
  EXPECT_EQ(steps.end, IsolatedEnd::signaled);
  EXPECT_EQ(steps.signal, SIGABRT);
  EXPECT_EQ(steps.progress, 3);
  pool.start(1);
  const IsolatedOutcome said = pool.take_oldest();
  EXPECT_EQ(said.message, "killed by SIGABRT (aborted): stub: about to abort");
  EXPECT_EQ(said.progress, 0);
}

TEST(CaseWorkers, AWorkerThatRetiresAnswersItsCaseAndIsReplaced) {
  CaseWorkerPool pool(stub({"retire", "ok:1"}), 1);
  pool.start(0);
  const IsolatedOutcome retired = pool.take_oldest();
  pool.start(1);
  const IsolatedOutcome next = pool.take_oldest();
  ASSERT_TRUE(retired.returned() && next.returned()) << retired.message << next.message;
  EXPECT_NE(pid_of(retired.payload), pid_of(next.payload));
  EXPECT_EQ(pool.workers_started(), 2);
}

TEST(CaseWorkers, AWorkerThatCannotGoOnIsAnEnvironmentError) {
  {
    CaseWorkerPool pool(stub({"fatal"}), 1);
    pool.start(0);
    try {
      pool.take_oldest();
      FAIL() << "no environment error";
    } catch (const model::EnvironmentError& e) {
      EXPECT_STREQ(e.what(), "the stub cannot go on");
    }
  }
  CaseWorkerStart start = stub({"ok:1"});
  start.setup["fail_setup"] = true;
  CaseWorkerPool pool(start, 1);
  pool.start(0);
  try {
    pool.take_oldest();
    FAIL() << "no environment error";
  } catch (const model::EnvironmentError& e) {
    EXPECT_STREQ(e.what(), "the stub has no setup");
  }
}

TEST(CaseWorkers, AProgramThatIsNoWorkerIsAnEnvironmentError) {
  CaseWorkerStart start = stub({"ok:1"});
  start.command = {"/bin/false"};
  CaseWorkerPool pool(start, 1);
  try {
    // It may have ended already when the case is given to it.
    pool.start(0);
    pool.take_oldest();
    FAIL() << "no environment error";
  } catch (const model::EnvironmentError& e) {
    EXPECT_STREQ(e.what(), "a case worker (/bin/false) exited with code 1 before it was ready");
  }
}

TEST(CaseWorkers, ClearKillsTheWorkersOfCasesStillRunning) {
  CaseWorkerPool pool(stub({"ok:60000", "ok:1"}), 2);
  pool.start(0);
  pool.start(1); // on the other worker
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(500);
  while (Clock::now() < until)
    pool.wait(); // case 1 is done, case 0 runs
  const std::vector<pid_t> before = children();
  ASSERT_EQ(before.size(), 2u);
  const Clock::time_point start = Clock::now();
  pool.clear();
  EXPECT_TRUE(pool.empty());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(children().size(), 1u); // the worker of case 0 is gone, the idle one stays
  // Slot 0 is the first idle one again: a fresh worker runs the next case there.
  pool.start(3);
  const IsolatedOutcome next = pool.take_oldest();
  ASSERT_TRUE(next.returned()) << next.message;
  EXPECT_EQ(next.payload.substr(0, 6), "case 3");
  EXPECT_EQ(pool.workers_started(), 3);
}

TEST(CaseWorkers, EachWorkerGetsItsOwnEnvironment) {
  CaseWorkerStart start = stub({"env"});
  start.environment = {{"MC_STUB_VAR=zero"}, {"MC_STUB_VAR=one"}};
  CaseWorkerPool pool(start, 2);
  // Both workers are idle: case 0 goes to worker 0, case 1 to worker 1.
  pool.start(0);
  pool.start(1);
  EXPECT_EQ(pool.take_oldest().payload, "case 0 env zero");
  EXPECT_EQ(pool.take_oldest().payload, "case 1 env one");
}

TEST(CaseWorkers, AWorkerFinishesItsCaseThroughSigintAndSigterm) {
  CaseWorkerPool pool(stub({"ok:500"}), 1);
  pool.start(0);
  // A terminal's Ctrl-C reaches the whole process group, a scheduler's SIGTERM may too.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::vector<pid_t> workers = children();
  ASSERT_EQ(workers.size(), 1u);
  kill(workers[0], SIGINT);
  kill(workers[0], SIGTERM);
  const IsolatedOutcome out = pool.take_oldest();
  ASSERT_TRUE(out.returned()) << out.message;
  EXPECT_EQ(out.payload.substr(0, 6), "case 0");
}

} // namespace
} // namespace mc::fuzz
