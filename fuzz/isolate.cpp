#include "fuzz/isolate.h"

#include "model/interrupt.h"

#include "model/address_ranges.h"
#include "model/errors.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

// What the child sends: frames of a tag byte, a 64-bit length and that many bytes.
constexpr char kFramePayload = 'P';
constexpr char kFrameThrew = 'E';
constexpr char kFrameFault = 'F';
constexpr std::size_t kFrameHeaderBytes = 1 + sizeof(std::uint64_t);

constexpr std::size_t kAltStackBytes = 64 << 10;
constexpr std::size_t kReadChunkBytes = 64 << 10;
constexpr int kPollMillisMax = 50;           // between checks whether the child has exited
constexpr int kExitParentGone = 121;         // the child found its parent gone before it started
constexpr std::size_t kQuotedBytesMax = 300; // of a stderr line in a message

// Sent by the crash handler as one frame, in one write (smaller than PIPE_BUF: atomic).
struct FaultRecord {
  std::int32_t signal = 0;
  std::int32_t code = 0; // si_code
  std::uint64_t address = 0;
  model::RangeLocation location;
};
static_assert(kFrameHeaderBytes + sizeof(FaultRecord) <= PIPE_BUF);

// --- The child

int g_result_fd = -1; // the child's end of the result pipe, for the crash handler

bool write_all(int fd, const char* data, std::size_t bytes) noexcept {
  while (bytes > 0) {
    const ssize_t n = write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

void frame_header(char* out, char tag, std::uint64_t bytes) noexcept {
  out[0] = tag;
  std::memcpy(out + 1, &bytes, sizeof bytes);
}

bool send_frame(char tag, std::string_view data) {
  char header[kFrameHeaderBytes];
  frame_header(header, tag, data.size());
  return write_all(g_result_fd, header, sizeof header) &&
         write_all(g_result_fd, data.data(), data.size());
}

// SIGSEGV/SIGBUS: report the address, then die of the signal as without the handler
// (SA_RESETHAND put the default action back; the raised signal is delivered on return, and a
// fault of the instruction itself repeats anyway). Async-signal-safe calls only.
void crash_handler(int signal, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  FaultRecord record;
  record.signal = signal;
  record.code = info->si_code;
  record.address = reinterpret_cast<std::uint64_t>(info->si_addr);
  record.location = model::locate_address(record.address);
  char frame[kFrameHeaderBytes + sizeof(FaultRecord)];
  frame_header(frame, kFrameFault, sizeof record);
  std::memcpy(frame + kFrameHeaderBytes, &record, sizeof record);
  write_all(g_result_fd, frame, sizeof frame);
  raise(signal);
  errno = saved_errno;
}

// Installed after the sanitizers' handlers (they install theirs at start-up), so it replaces
// them for these two signals (ASan's allow_user_segv_handler, on by default).
void install_crash_handler() {
  void* stack =
      mmap(nullptr, kAltStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack != MAP_FAILED) {
    stack_t alt{};
    alt.ss_sp = stack;
    alt.ss_size = kAltStackBytes;
    sigaltstack(&alt, nullptr);
  }
  struct sigaction action {};
  action.sa_sigaction = crash_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
}

[[noreturn]] void child_main(const IsolatedWork& work, int result_fd, int stderr_fd, pid_t parent) {
  // Killed with the thread that forked it: a parent interrupted on a terminal leaves no child.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitParentGone);
  // Ctrl-C reaches the whole process group: the case finishes, and the parent stops after it.
  model::ignore_interrupts();
  dup2(stderr_fd, STDERR_FILENO);
  close(stderr_fd);
  g_result_fd = result_fd;
  install_crash_handler();
  try {
    const std::string payload = work();
    std::cout.flush();
    std::fflush(nullptr);
    _exit(send_frame(kFramePayload, payload) ? 0 : 1);
  } catch (const std::exception& e) {
    send_frame(kFrameThrew, e.what());
  } catch (...) {
    send_frame(kFrameThrew, "an exception that is not a std::exception");
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

// What the parent gathered from the child.
struct Gathered {
  std::string frames;
  std::string stderr_text;
  int status = 0;
  bool timed_out = false;
  bool too_big = false;
};

struct Frames {
  std::optional<std::string> payload;
  std::optional<std::string> threw;
  std::optional<FaultRecord> fault;
};

// A frame cut short (the child died while writing it) is dropped.
Frames parse_frames(const std::string& bytes) {
  Frames frames;
  std::size_t at = 0;
  while (bytes.size() - at >= kFrameHeaderBytes) {
    const char tag = bytes[at];
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at + 1, sizeof length);
    at += kFrameHeaderBytes;
    if (length > bytes.size() - at) break;
    std::string data = bytes.substr(at, length);
    at += length;
    if (tag == kFramePayload) {
      frames.payload = std::move(data);
    } else if (tag == kFrameThrew) {
      frames.threw = std::move(data);
    } else if (tag == kFrameFault && data.size() == sizeof(FaultRecord)) {
      FaultRecord record;
      std::memcpy(&record, data.data(), sizeof record);
      record.location.name[model::kRangeNameBytesMax - 1] = '\0';
      frames.fault = record;
    }
  }
  return frames;
}

// The line of the child's stderr that says most: a sanitizer's ERROR line, a runtime error,
// an assertion; else the first non-empty line. Without the "==PID==" prefix and the
// registers of a sanitizer's line.
std::string telling_line(std::string_view text) {
  constexpr std::string_view kMarkers[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                           "runtime error:", "internal assertion failed",
                                           "terminate called"};
  std::string_view first;
  std::string_view chosen;
  std::size_t at = 0;
  while (at < text.size() && chosen.empty()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (first.empty()) first = line;
    for (const std::string_view marker : kMarkers)
      if (line.find(marker) != std::string_view::npos) chosen = line;
  }
  std::string_view line = chosen.empty() ? first : chosen;
  if (line.substr(0, 2) == "==") {
    const std::size_t close = line.find("==", 2);
    if (close != std::string_view::npos) line.remove_prefix(close + 2);
  }
  if (const std::size_t pc = line.find(" at pc 0x"); pc != std::string_view::npos)
    line = line.substr(0, pc);
  std::string out(line.substr(0, kQuotedBytesMax));
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  return out;
}

std::string with_stderr_line(std::string message, const std::string& stderr_text) {
  const std::string line = telling_line(stderr_text);
  if (!line.empty()) message += fmt::format(": {}", line);
  return message;
}

IsolatedOutcome classify(Gathered gathered, const IsolateOptions& options) {
  Frames frames = parse_frames(gathered.frames);
  IsolatedOutcome out;
  out.stderr_text = std::move(gathered.stderr_text);
  if (frames.fault) out.fault_address = frames.fault->address;
  const int status = gathered.status;
  if (gathered.timed_out) {
    out.end = IsolatedEnd::timed_out;
    out.message = fmt::format("exceeded {} s; killed", options.timeout_seconds);
  } else if (gathered.too_big) {
    out.end = IsolatedEnd::timed_out;
    out.message =
        fmt::format("wrote more than {} bytes of payload; killed", options.payload_bytes_max);
  } else if (WIFSIGNALED(status)) {
    out.end = IsolatedEnd::signaled;
    out.signal = WTERMSIG(status);
    out.message = fmt::format("killed by {}", signal_name(out.signal));
    if (frames.fault && frames.fault->signal == out.signal) {
      out.message += fmt::format(" at address {:#x} ({})", frames.fault->address,
                                 model::describe(frames.fault->location));
    } else {
      out.message = with_stderr_line(std::move(out.message), out.stderr_text);
    }
  } else if (frames.threw) {
    out.end = IsolatedEnd::threw;
    out.message = fmt::format("threw: {}", *frames.threw);
  } else if (frames.payload && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    out.payload = std::move(*frames.payload);
  } else {
    out.end = IsolatedEnd::exited;
    out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out.message = with_stderr_line(
        fmt::format("exited with code {} without a result", out.exit_code), out.stderr_text);
  }
  return out;
}

} // namespace

// What the parent gathers from one child while it runs (IsolatedChild).
class IsolatedGatherer {
public:
  IsolatedGatherer(pid_t pid, int result_fd, int stderr_fd, const IsolateOptions& options)
      : pid_(pid), fds_{result_fd, stderr_fd},
        frames_max_(static_cast<std::size_t>(options.payload_bytes_max) + 2 * kFrameHeaderBytes +
                    sizeof(FaultRecord)) {
    if (options.timeout_seconds > 0)
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(options.timeout_seconds));
  }

  // Looks at the child without waiting; true once nothing more will come from it (it was
  // reaped and its pipes drained, it ran past its deadline, or it wrote too much).
  bool settle() {
    if (settled_) return true;
    if (!reaped_ && waitpid(pid_, &out_.status, WNOHANG) == pid_) reaped_ = true;
    if (reaped_) {
      // What is left in the pipes is already there: no waiting (a grandchild holding them
      // open would otherwise keep us here).
      while (any_open() && !out_.too_big && poll_and_read(0)) {
      }
      return settled_ = true;
    }
    if (deadline_ && Clock::now() >= *deadline_) {
      out_.timed_out = true;
      return settled_ = true;
    }
    return settled_ = out_.too_big;
  }

  // The pipes to wait on, and how long at most: until the deadline, and briefly while the
  // child has closed its pipes but not yet exited.
  void to_poll(std::vector<pollfd>& fds, int& millis) const {
    if (!any_open()) millis = std::min(millis, 1);
    for (const int fd : fds_)
      if (fd >= 0) fds.push_back(pollfd{.fd = fd, .events = POLLIN, .revents = 0});
    if (deadline_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - Clock::now());
      millis = static_cast<int>(std::clamp<std::int64_t>(left.count() + 1, 0, millis));
    }
  }

  bool owns(int fd) const { return fd >= 0 && (fd == fds_[0] || fd == fds_[1]); }
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
      out_.frames.append(chunk, bytes);
      out_.too_big = out_.frames.size() > frames_max_;
    } else if (out_.stderr_text.size() < kIsolatedStderrBytesMax) {
      out_.stderr_text.append(chunk,
                              std::min(bytes, kIsolatedStderrBytesMax - out_.stderr_text.size()));
    }
  }

  // Kills a child still running and reaps it; what it sent.
  Gathered finish() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &out_.status, 0);
      reaped_ = true;
    }
    for (int& fd : fds_)
      if (fd >= 0) {
        close(fd);
        fd = -1;
      }
    return std::move(out_);
  }

private:
  bool any_open() const { return fds_[0] >= 0 || fds_[1] >= 0; }

  // Reads what is ready; false when nothing was.
  bool poll_and_read(int millis) {
    std::vector<pollfd> polled;
    for (const int fd : fds_)
      if (fd >= 0) polled.push_back(pollfd{.fd = fd, .events = POLLIN, .revents = 0});
    const int ready = poll(polled.data(), polled.size(), millis);
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "run_isolated: poll");
    if (ready <= 0) return false;
    for (const pollfd& p : polled)
      if (p.revents != 0) read_from(p.fd);
    return true;
  }

  pid_t pid_;
  int fds_[2];
  std::size_t frames_max_;
  std::optional<Clock::time_point> deadline_;
  bool reaped_ = false;
  bool settled_ = false;
  Gathered out_;
};

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

IsolatedChild::IsolatedChild(const IsolatedWork& work, const IsolateOptions& options)
    : options_(options) {
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
  gatherer_ = std::make_unique<IsolatedGatherer>(pid, result.read_fd, errors.read_fd, options);
}

IsolatedChild::~IsolatedChild() {
  if (gatherer_) gatherer_->finish();
}

bool IsolatedChild::done() { return gatherer_ && gatherer_->settle(); }

IsolatedOutcome IsolatedChild::outcome() {
  MC_ASSERT(gatherer_ != nullptr);
  while (!done())
    wait_for_any(std::span<IsolatedChild* const>(std::array{this}));
  IsolatedOutcome out = classify(gatherer_->finish(), options_);
  gatherer_.reset();
  return out;
}

void wait_for_any(std::span<IsolatedChild* const> children) {
  for (;;) {
    std::vector<pollfd> fds;
    int millis = kPollMillisMax;
    bool waiting = false;
    for (IsolatedChild* child : children) {
      if (child->done()) return;
      child->gatherer_->to_poll(fds, millis);
      waiting = true;
    }
    if (!waiting) return;
    if (fds.empty()) { // every child closed its pipes and has not exited yet
      std::this_thread::sleep_for(std::chrono::milliseconds(millis));
      continue;
    }
    const int ready = poll(fds.data(), fds.size(), millis);
    if (ready < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "run_isolated: poll");
    if (ready <= 0) continue;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      for (IsolatedChild* child : children)
        if (child->gatherer_->owns(p.fd)) {
          child->gatherer_->read_from(p.fd);
          break;
        }
    }
  }
}

IsolatedOutcome run_isolated(const IsolatedWork& work, const IsolateOptions& options) {
  IsolatedChild child(work, options);
  return child.outcome();
}

} // namespace mc::fuzz
