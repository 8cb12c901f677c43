// Child processes: spawn or fork, pipes, deadlines, kill and reap (process.h).
#include "model/process.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <system_error>
#include <thread>

extern char** environ;

namespace mc::model {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kLowestPipeFd = 10;
constexpr std::size_t kReadChunkBytes = 64 << 10;
constexpr int kExitBodyReturned = 127;

[[noreturn]] void throw_errno(int error, std::string_view what, std::string_view call) {
  throw std::system_error(error, std::generic_category(), fmt::format("{}: {}", what, call));
}

// `fd` moved to kLowestPipeFd or above (close-on-exec).
Fd high_fd(Fd fd, std::string_view what) {
  if (fd.get() >= kLowestPipeFd) return fd;
  const int moved = fcntl(fd.get(), F_DUPFD_CLOEXEC, kLowestPipeFd);
  if (moved < 0) throw_errno(errno, what, "fcntl");
  return Fd(moved);
}

// The pipes of `fds`, the child's end first (none for one of ours).
std::vector<std::pair<Fd, Fd>> make_pipes(const std::vector<ChildFd>& fds, std::string_view what) {
  std::vector<std::pair<Fd, Fd>> out(fds.size());
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].ours >= 0) continue;
    int ends[2] = {-1, -1};
    if (pipe2(ends, O_CLOEXEC) != 0) throw_errno(errno, what, "pipe2");
    Fd read_end(ends[0]);
    Fd write_end(ends[1]);
    read_end = high_fd(std::move(read_end), what);
    write_end = high_fd(std::move(write_end), what);
    if (fds[i].child_writes) {
      // A poll's answer can be stale by the time we read (another read drained the pipe
      // meanwhile): such a read must find nothing, not block.
      fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
      out[i] = {std::move(write_end), std::move(read_end)};
    } else {
      out[i] = {std::move(read_end), std::move(write_end)};
    }
  }
  return out;
}

// This process's environment with `overrides` (NAME=value) set.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
  const auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const bool overridden = std::ranges::any_of(
        overrides, [&](const std::string& o) { return name_of(o) == name_of(entry); });
    if (!overridden) out.emplace_back(entry);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

sigset_t signal_set(const std::vector<int>& signals) {
  sigset_t set;
  sigemptyset(&set);
  for (const int s : signals)
    sigaddset(&set, s);
  return set;
}

} // namespace

Deadline Deadline::after(double seconds) {
  MC_ASSERT(seconds >= 0);
  if (seconds == 0) return {};
  return {Clock::now() +
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))};
}

int Deadline::millis(int millis_max) const {
  if (!at) return millis_max;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*at - Clock::now());
  // +1: a poll woken just before the deadline would otherwise spin on a 0 ms wait.
  return static_cast<int>(std::clamp<std::int64_t>(left.count() + 1, 0, millis_max));
}

std::string ProcessEnd::describe() const {
  if (signaled()) return fmt::format("killed by {}", signal_description(signal()));
  if (WIFEXITED(status)) return fmt::format("exited with code {}", exit_code());
  return "stopped";
}

std::string signal_description(int signal) {
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

Child Child::spawn(const SpawnOptions& o) {
  MC_ASSERT(!o.program.empty() && !o.argv.empty());
  std::vector<std::pair<Fd, Fd>> pipes = make_pipes(o.fds, o.what);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (std::size_t i = 0; i < o.fds.size(); ++i)
    for (const int at : o.fds[i].at)
      posix_spawn_file_actions_adddup2(
          &actions, o.fds[i].ours >= 0 ? o.fds[i].ours : pipes[i].first.get(), at);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  const sigset_t defaults = signal_set(o.default_signals);
  const sigset_t blocked = signal_set(o.blocked_signals);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &blocked);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(
      &attributes, static_cast<short>(POSIX_SPAWN_SETSIGDEF |
                                      (o.blocked_signals.empty() ? 0 : POSIX_SPAWN_SETSIGMASK) |
                                      (o.own_group ? POSIX_SPAWN_SETPGROUP : 0)));
  std::vector<std::string> args = o.argv;
  std::vector<std::string> env = environment_with(o.environment);
  Child child;
  const int spawned = posix_spawn(&child.pid_, o.program.c_str(), &actions, &attributes,
                                  c_strings(args).data(), c_strings(env).data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    child.pid_ = -1;
    throw SpawnFailure(spawned, std::generic_category(), fmt::format("{}: posix_spawn", o.what));
  }
  child.own_group_ = o.own_group;
  for (std::pair<Fd, Fd>& p : pipes)
    child.ends_.push_back(std::move(p.second));
  return child;
}

Child Child::fork(const std::vector<ChildFd>& fds,
                  const std::function<void(std::span<const int> ends)>& body,
                  std::string_view what) {
  std::vector<std::pair<Fd, Fd>> pipes = make_pipes(fds, what);
  std::cout.flush();
  std::fflush(nullptr);
  Child child;
  child.pid_ = ::fork();
  if (child.pid_ < 0) throw_errno(errno, what, "fork");
  if (child.pid_ == 0) {
    std::vector<int> ends;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      pipes[i].second.reset();
      int end = fds[i].ours >= 0 ? fds[i].ours : pipes[i].first.get();
      for (const int at : fds[i].at)
        dup2(end, at);
      if (!fds[i].at.empty()) {
        pipes[i].first.reset();
        end = fds[i].at.front();
      }
      ends.push_back(end);
    }
    body(ends);
    _exit(kExitBodyReturned);
  }
  for (std::pair<Fd, Fd>& p : pipes)
    child.ends_.push_back(std::move(p.second));
  return child;
}

Child::~Child() {
  if (running()) reap(0);
}

Child& Child::operator=(Child&& other) noexcept {
  std::swap(pid_, other.pid_);
  std::swap(own_group_, other.own_group_);
  std::swap(end_, other.end_);
  std::swap(ends_, other.ends_);
  return *this;
}

std::optional<ProcessEnd> Child::wait_for(int millis) {
  if (end_ || pid_ <= 0) return end_;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(millis);
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) return end_ = ProcessEnd{status};
    if (done < 0) return end_ = ProcessEnd{}; // reaped already
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Child::kill() {
  if (pid_ <= 0) return;
  if (own_group_)
    ::kill(-pid_, SIGKILL);
  else if (!end_)
    ::kill(pid_, SIGKILL);
}

ProcessEnd Child::reap(int millis) {
  if (pid_ <= 0) return {};
  if (const std::optional<ProcessEnd> e = wait_for(millis)) return *e;
  kill();
  return wait();
}

ProcessEnd Child::wait() {
  if (!running()) return end_.value_or(ProcessEnd{});
  int status = 0;
  waitpid(pid_, &status, 0);
  end_ = ProcessEnd{status};
  return *end_;
}

bool write_all(int fd, std::string_view data) noexcept {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

ReadEnd read_some(int fd, std::string& out) {
  char chunk[kReadChunkBytes];
  const ssize_t got = ::read(fd, chunk, sizeof chunk);
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return ReadEnd::nothing;
  if (got <= 0) return ReadEnd::closed;
  out.append(chunk, static_cast<std::size_t>(got));
  return ReadEnd::bytes;
}

ReadEnd read_line(int fd, std::string& buffer, std::string& line, const Deadline& deadline,
                  std::size_t bytes_max) {
  for (;;) {
    if (const std::size_t end = buffer.find('\n'); end != std::string::npos) {
      line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return ReadEnd::line;
    }
    if (buffer.size() > bytes_max) return ReadEnd::too_long;
    if (deadline.passed()) return ReadEnd::timed_out;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = poll(&p, 1, deadline.millis(1000));
    if (ready < 0 && errno != EINTR) return ReadEnd::failed;
    if (ready > 0 && read_some(fd, buffer) == ReadEnd::closed) return ReadEnd::closed;
  }
}

bool readable_now(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, 0) > 0;
}

bool die_with_parent(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  return getppid() == parent;
}

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (const char ch : text) {
    if (ch == '\'')
      out += "'\\''";
    else
      out += ch;
  }
  return out + "'";
}

std::string excerpt(std::string_view text) {
  constexpr std::size_t kQuotedBytesMax = 300;
  std::string out(text.substr(0, kQuotedBytesMax));
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  if (text.size() > kQuotedBytesMax) out += "...";
  return out;
}

} // namespace mc::model
