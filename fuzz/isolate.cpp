#include "fuzz/isolate.h"

#include "fuzz/isolate_frames.h"
#include "model/errors.h"
#include "model/interrupt.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunkBytes = 64 << 10;
constexpr int kPollMillisMax = 50;   // between checks whether the child has exited
constexpr int kExitParentGone = 121; // the child found its parent gone before it started

// --- The child

[[noreturn]] void child_main(const IsolatedWork& work, int result_fd, int stderr_fd, pid_t parent) {
  // Killed with the thread that forked it: a parent interrupted on a terminal leaves no child.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitParentGone);
  // Ctrl-C reaches the whole process group: the case finishes, and the parent stops after it.
  model::ignore_interrupts();
  dup2(stderr_fd, STDERR_FILENO);
  close(stderr_fd);
  frames::set_result_fd(result_fd);
  frames::install_crash_handler();
  try {
    const std::string payload = work();
    std::cout.flush();
    std::fflush(nullptr);
    _exit(frames::send(frames::kPayload, payload) ? 0 : 1);
  } catch (const std::exception& e) {
    frames::send(frames::kThrew, e.what());
  } catch (...) {
    frames::send(frames::kThrew, "an exception that is not a std::exception");
  }
  std::cout.flush();
  std::fflush(nullptr);
  _exit(0);
}

// --- The parent

struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
};

Pipe make_pipe() {
  int fds[2] = {-1, -1};
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "run_isolated: pipe2");
  return Pipe{.read_fd = fds[0], .write_fd = fds[1]};
}

// What the parent gathers from the child while it runs: its frames and stderr until it has
// exited and its pipes are drained, it runs past its deadline, or it writes too much.
class Gatherer {
public:
  Gatherer(pid_t pid, int result_fd, int stderr_fd, const IsolateOptions& options)
      : pid_(pid), fds_{result_fd, stderr_fd},
        frames_max_(static_cast<std::size_t>(options.payload_bytes_max) + 2 * frames::kHeaderBytes +
                    sizeof(frames::FaultRecord)) {
    if (options.timeout_seconds > 0)
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(options.timeout_seconds));
  }

  ~Gatherer() { finish(); }
  Gatherer(const Gatherer&) = delete;
  Gatherer& operator=(const Gatherer&) = delete;

  frames::CaseEnd gather() {
    while (!settled())
      poll_and_read(poll_millis());
    finish();
    end_.exited = true;
    while (std::optional<frames::Frame> frame = frames::take_frame(bytes_))
      end_.frames.add(std::move(*frame));
    return std::move(end_);
  }

private:
  bool any_open() const { return fds_[0] >= 0 || fds_[1] >= 0; }

  // Kills a child still running (past its deadline, too big, or the parent threw) and reaps it.
  void finish() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &end_.status, 0);
      reaped_ = true;
    }
    for (int& fd : fds_)
      if (fd >= 0) {
        close(fd);
        fd = -1;
      }
  }

  bool settled() {
    if (!reaped_ && waitpid(pid_, &end_.status, WNOHANG) == pid_) reaped_ = true;
    if (reaped_) {
      // What is left in the pipes is already there: no waiting (a grandchild holding them
      // open would otherwise keep us here).
      while (any_open() && !end_.too_big && poll_and_read(0)) {
      }
      return true;
    }
    if (deadline_ && Clock::now() >= *deadline_) return end_.timed_out = true;
    return end_.too_big;
  }

  // Until the deadline, and briefly while the child has closed its pipes but not yet exited.
  int poll_millis() const {
    int millis = any_open() ? kPollMillisMax : 1;
    if (deadline_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - Clock::now());
      millis = static_cast<int>(std::clamp<std::int64_t>(left.count() + 1, 0, millis));
    }
    return millis;
  }

  // Reads what is ready; false when nothing was.
  bool poll_and_read(int millis) {
    std::vector<pollfd> polled;
    for (const int fd : fds_)
      if (fd >= 0) polled.push_back(pollfd{.fd = fd, .events = POLLIN, .revents = 0});
    if (polled.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(millis));
      return false;
    }
    const int ready = poll(polled.data(), polled.size(), millis);
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "run_isolated: poll");
    if (ready <= 0) return false;
    for (const pollfd& p : polled)
      if (p.revents != 0) read_from(p.fd);
    return true;
  }

  void read_from(int fd) {
    char chunk[kReadChunkBytes];
    const ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) return;
    int& slot = fd == fds_[0] ? fds_[0] : fds_[1];
    if (got <= 0) {
      close(slot);
      slot = -1;
      return;
    }
    const auto bytes = static_cast<std::size_t>(got);
    if (&slot == &fds_[0]) {
      bytes_.append(chunk, bytes);
      end_.too_big = bytes_.size() > frames_max_;
    } else if (end_.stderr_text.size() < kIsolatedStderrBytesMax) {
      end_.stderr_text.append(chunk,
                              std::min(bytes, kIsolatedStderrBytesMax - end_.stderr_text.size()));
    }
  }

  pid_t pid_;
  int fds_[2];
  std::size_t frames_max_;
  std::optional<Clock::time_point> deadline_;
  bool reaped_ = false;
  std::string bytes_; // frames as they came
  frames::CaseEnd end_;
};

} // namespace

std::string signal_name(int signal) {
  struct Named {
    int signal;
    std::string_view name;
    std::string_view meaning;
  };
  static constexpr Named kNames[] = {
      {SIGSEGV, "SIGSEGV", "invalid memory reference"},
      {SIGBUS, "SIGBUS", "bus error: bad memory access"},
      {SIGABRT, "SIGABRT", "aborted"},
      {SIGFPE, "SIGFPE", "arithmetic exception"},
      {SIGILL, "SIGILL", "illegal instruction"},
      {SIGTRAP, "SIGTRAP", "trace or breakpoint trap"},
      {SIGKILL, "SIGKILL", "killed"},
      {SIGTERM, "SIGTERM", "terminated"},
      {SIGINT, "SIGINT", "interrupted"},
      {SIGPIPE, "SIGPIPE", "broken pipe"},
      {SIGXCPU, "SIGXCPU", "CPU time limit exceeded"},
  };
  for (const Named& n : kNames)
    if (n.signal == signal) return fmt::format("{} ({})", n.name, n.meaning);
  return fmt::format("signal {}", signal);
}

IsolatedOutcome run_isolated(const IsolatedWork& work, const IsolateOptions& options) {
  MC_ASSERT(work != nullptr);
  MC_ASSERT(options.timeout_seconds >= 0);
  MC_ASSERT(options.payload_bytes_max > 0);
  const Pipe result = make_pipe();
  const Pipe errors = make_pipe();
  // Buffered output would otherwise be written twice, once by each process.
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    for (const int fd : {result.read_fd, result.write_fd, errors.read_fd, errors.write_fd})
      close(fd);
    throw std::system_error(error, std::generic_category(), "run_isolated: fork");
  }
  if (pid == 0) {
    close(result.read_fd);
    close(errors.read_fd);
    child_main(work, result.write_fd, errors.write_fd, parent);
  }
  close(result.write_fd);
  close(errors.write_fd);
  Gatherer gatherer(pid, result.read_fd, errors.read_fd, options);
  return frames::classify(gatherer.gather(), options);
}

} // namespace mc::fuzz
