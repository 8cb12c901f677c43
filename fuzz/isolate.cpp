#include "fuzz/isolate.h"

#include "fuzz/isolate_frames.h"
#include "model/errors.h"
#include "model/interrupt.h"
#include "model/process.h"

#include <fmt/format.h>

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <system_error>
#include <thread>
#include <vector>

namespace mc::fuzz {
namespace {

constexpr int kPollMillisMax = 50;   // between checks whether the child has exited
constexpr int kExitParentGone = 121; // the child found its parent gone before it started

// --- The child

[[noreturn]] void child_main(const IsolatedWork& work, int result_fd, pid_t parent) {
  if (!model::die_with_parent(parent)) _exit(kExitParentGone);
  // Ctrl-C reaches the whole process group: the case finishes, and the parent stops after it.
  model::ignore_interrupts();
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

// What the parent gathers from the child while it runs: its frames (pipe 0) and stderr (pipe
// 1) until it has exited and its pipes are drained, it runs past its deadline, or it writes
// too much. A child still running at the end (past its deadline, too big, or the parent threw)
// is killed and reaped by ~Child.
class Gatherer {
public:
  Gatherer(model::Child child, const IsolateOptions& options)
      : child_(std::move(child)), deadline_(model::Deadline::after(options.timeout_seconds)),
        frames_max_(frames::frames_bytes_max(options)) {}

  frames::CaseEnd gather() {
    while (!settled())
      poll_and_read(deadline_.millis(any_open() ? kPollMillisMax : 1));
    end_.status = child_.reap().status;
    child_.close_all();
    end_.exited = true;
    while (std::optional<frames::Frame> frame = frames::take_frame(bytes_))
      end_.frames.add(std::move(*frame));
    return std::move(end_);
  }

private:
  bool any_open() const { return child_.fd(0) >= 0 || child_.fd(1) >= 0; }

  bool settled() {
    if (child_.wait_for(0)) {
      // What is left in the pipes is already there: no waiting (a grandchild holding them
      // open would otherwise keep us here).
      while (any_open() && !end_.too_big && poll_and_read(0)) {
      }
      return true;
    }
    if (deadline_.passed()) return end_.timed_out = true;
    return end_.too_big;
  }

  // Reads what is ready; false when nothing was.
  bool poll_and_read(int millis) {
    std::vector<pollfd> polled;
    for (std::size_t i = 0; i < 2; ++i)
      if (child_.fd(i) >= 0)
        polled.push_back(pollfd{.fd = child_.fd(i), .events = POLLIN, .revents = 0});
    if (polled.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(millis));
      return false;
    }
    const int ready = poll(polled.data(), polled.size(), millis);
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "run_isolated: poll");
    if (ready <= 0) return false;
    for (const pollfd& p : polled)
      if (p.revents != 0) read_from(p.fd == child_.fd(0) ? 0 : 1);
    return true;
  }

  void read_from(std::size_t pipe) {
    std::string chunk;
    const model::ReadEnd got = model::read_some(child_.fd(pipe), chunk);
    if (got == model::ReadEnd::closed) child_.close(pipe);
    if (pipe == 0) {
      bytes_ += chunk;
      end_.too_big = bytes_.size() > frames_max_;
    } else if (end_.stderr_text.size() < kIsolatedStderrBytesMax) {
      end_.stderr_text.append(chunk, 0, kIsolatedStderrBytesMax - end_.stderr_text.size());
    }
  }

  model::Child child_;
  model::Deadline deadline_;
  std::size_t frames_max_;
  std::string bytes_; // frames as they came
  frames::CaseEnd end_;
};

} // namespace

IsolatedOutcome run_isolated(const IsolatedWork& work, const IsolateOptions& options) {
  MC_ASSERT(work != nullptr);
  MC_ASSERT(options.timeout_seconds >= 0);
  MC_ASSERT(options.payload_bytes_max > 0);
  const pid_t parent = getpid();
  model::Child child = model::Child::fork(
      {{.at = {}}, {.at = {STDERR_FILENO}}},
      [&](std::span<const int> ends) { child_main(work, ends[0], parent); }, "run_isolated");
  Gatherer gatherer(std::move(child), options);
  return frames::classify(gatherer.gather(), options);
}

std::optional<std::string> run_isolated_payload(const IsolatedWork& work, std::string& failure) {
  IsolatedOutcome outcome = run_isolated(work);
  if (outcome.returned()) return std::move(outcome.payload);
  failure = std::move(outcome.message);
  return std::nullopt;
}

} // namespace mc::fuzz
