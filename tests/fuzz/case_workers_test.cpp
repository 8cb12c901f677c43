// CaseWorkerPool with a stub worker (case_worker_stub.cpp): cases go to `jobs` workers at once
// and their outcomes come back in case order whatever order they finish in; a worker that
// crashes, runs past its timeout or asks to retire is replaced by a fresh process, and the
// case's outcome says what happened as a forked child's would; a throw is an outcome and the
// worker stays; a worker that cannot go on is an environment error; cleared cases' workers are
// killed; each worker gets its own environment; a worker finishes its case through SIGINT.
// What a test must see happen while a case runs, it sees through the stub's gate (a case that
// marks its start and waits until the test opens it), never through how long something took.
#include "fuzz/case_workers.h"
#include "model/errors.h"
#include "tests/model/temp_dir.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fcntl.h>
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

// The gate of the stub's "gate" cases: the directory they mark their start in and wait on.
class Gate {
public:
  std::string dir() const { return dir_.path().string(); }
  // Whether gated case `index` has started (waiting at most kStartSecondsMax for it: less than
  // the stub's own wait, so a case that never started is told from one that gave up).
  bool started(std::int64_t index) const {
    const std::filesystem::path mark = dir_.path() / fmt::format("running-{}", index);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kStartSecondsMax);
    while (!std::filesystem::exists(mark)) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  void open() const { std::ofstream(dir_.path() / "open").close(); }

private:
  static constexpr int kStartSecondsMax = 30;
  model::testing::TempDir dir_;
};

CaseWorkerStart stub(const std::vector<std::string>& plan, double timeout_seconds = 0,
                     const Gate* gate = nullptr) {
  CaseWorkerStart start;
  start.command = {MC_CASE_WORKER_STUB, "case-worker"};
  start.setup["plan"] = plan;
  if (gate != nullptr) start.setup["gate_dir"] = gate->dir();
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
    // open and read, not a stream: a process that exits meanwhile makes the read fail, which
    // is simply not one of ours (a stream's failure path tripped AddressSanitizer's runtime).
    const int fd = ::open((entry.path() / "stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buffer[1024];
    const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
    ::close(fd);
    if (n <= 0) continue;
    const std::string text(buffer, static_cast<std::size_t>(n));
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
  const Gate gate;
  CaseWorkerPool pool(stub({"gate", "gate", "gate", "gate", "gate", "gate", "ok:1"}, 0, &gate), 2);
  pool.start(0);
  pool.start(1); // the idle worker gets it
  // Each worker takes one more, waiting in its input, and no more.
  pool.start(2);
  pool.start(3);
  EXPECT_FALSE(pool.has_room());
  pool.clear();
  pool.start(4);
  pool.start(5);
  // Side by side: case 5 starts while case 4 waits at the shut gate, which one worker running
  // them in turn could not do.
  ASSERT_TRUE(gate.started(4));
  ASSERT_TRUE(gate.started(5)) << "case 5 did not start while case 4 ran";
  gate.open();
  const IsolatedOutcome a = pool.take_oldest();
  const IsolatedOutcome b = pool.take_oldest();
  ASSERT_TRUE(a.returned() && b.returned()) << a.message << b.message;
  EXPECT_EQ(a.payload.substr(0, 6), "case 4");
  EXPECT_EQ(b.payload.substr(0, 6), "case 5");
  EXPECT_NE(pid_of(a.payload), pid_of(b.payload));
  pool.start(6);
  const IsolatedOutcome c = pool.take_oldest();
  ASSERT_TRUE(c.returned()) << c.message;
  // The two cleared workers were killed; the two that ran cases 4 and 5 still run case 6.
  EXPECT_TRUE(pid_of(c.payload) == pid_of(a.payload) || pid_of(c.payload) == pid_of(b.payload));
  EXPECT_EQ(pool.workers_started(), 4);
}

// While a slow case runs, the other worker goes on through the other cases, not a handful: the
// outcomes wait behind it, in case order, far past two a job. Kernel case times have a heavy
// tail, and a short window held 16 workers to 8x one.
TEST(CaseWorkers, ASlowCaseDoesNotHoldTheOtherWorkersBack) {
  const Gate gate;
  std::vector<std::string> plan(300, "ok:1");
  plan[0] = "gate"; // the slow case: it ends when the test opens the gate
  CaseWorkerPool pool(stub(plan, 0, &gate), 2);
  std::int64_t started = 0;
  // A pool that held the cases back would start no more until case 0 ended, which it does here
  // only when the stub gives up on the gate: the loop ends either way.
  while (started < std::ssize(plan) && !pool.oldest_done()) {
    while (started < std::ssize(plan) && pool.has_room())
      pool.start(started++);
    if (started < std::ssize(plan)) pool.wait();
  }
  // Every case started while case 0 waited at the shut gate: its worker holds case 0 and the one
  // queued behind it, so the other worker ran all the rest but the two it was last given (the
  // old window of 8 a job would have stopped at 16 cases started).
  EXPECT_EQ(started, std::ssize(plan));
  EXPECT_FALSE(pool.oldest_done());
  gate.open();
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
  const Gate gate; // never opened: case 2 runs until its timeout
  CaseWorkerPool pool(stub({"segv", "ok:1", "gate", "ok:1", "retire", "ok:1"}, 1.0, &gate), 1);
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
  const Gate gate; // never opened: case 0 can only end by its timeout
  CaseWorkerPool pool(stub({"gate", "ok:1"}, 0.3, &gate), 1);
  pool.start(0);
  const IsolatedOutcome late = pool.take_oldest();
  EXPECT_TRUE(gate.started(0));
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
  const Gate gate; // never opened: case 1 runs until it is killed
  CaseWorkerPool pool(stub({"ok:1", "gate", "ok:1", "ok:1"}, 0, &gate), 2);
  pool.start(0);
  const IsolatedOutcome first = pool.take_oldest();
  ASSERT_TRUE(first.returned()) << first.message;
  pool.start(1); // on the first idle worker, slot 0 again
  ASSERT_TRUE(gate.started(1));
  const std::vector<pid_t> before = children();
  ASSERT_EQ(before.size(), 2u);
  pool.clear();
  EXPECT_TRUE(pool.empty());
  // Gone at once, with its gate still shut: killed, not waited for.
  EXPECT_EQ(children().size(), 1u); // the worker of case 1 is gone, the idle one stays
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
  const Gate gate;
  CaseWorkerPool pool(stub({"gate", "ok:1"}, 0, &gate), 1);
  pool.start(0);
  // A terminal's Ctrl-C reaches the whole process group, a scheduler's SIGTERM may too: here
  // while the worker runs case 0.
  ASSERT_TRUE(gate.started(0));
  const std::vector<pid_t> workers = children();
  ASSERT_EQ(workers.size(), 1u);
  kill(workers[0], SIGINT);
  kill(workers[0], SIGTERM);
  gate.open();
  const IsolatedOutcome out = pool.take_oldest();
  ASSERT_TRUE(out.returned()) << out.message;
  EXPECT_EQ(out.payload.substr(0, 6), "case 0");
  // And it lives on: the next case runs on it.
  pool.start(1);
  const IsolatedOutcome next = pool.take_oldest();
  ASSERT_TRUE(next.returned()) << next.message;
  EXPECT_EQ(pid_of(next.payload), pid_of(out.payload));
  EXPECT_EQ(pool.workers_started(), 1);
}

} // namespace
} // namespace mc::fuzz
