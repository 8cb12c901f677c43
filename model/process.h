// Child processes, for every place that starts one: the forked child that runs a case in
// isolation (fuzz/isolate.h), case workers (fuzz/case_workers.h), an external adapter's worker
// (backends/external_backend.h), the MPS daemon and its probe (cli/mps.h). One way to start a
// process with chosen descriptors piped, to read and write those pipes against a deadline, to
// kill it (its process group, where it has one) and reap it, and to say how it ended.
//
// - Pipes are close-on-exec and kept at descriptor 10 or above, so the descriptors a child is
//   given (0 to 3) never collide with a pipe's own, and what the child starts in turn inherits
//   none of them.
// - A Child destroyed while its process runs kills and reaps it: no zombie, no orphan.
// - Writing to a child that died raises SIGPIPE: a caller that writes ignores it first.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace mc::model {

// An owned descriptor, closed when reset or destroyed.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_); // ours closes with `other`
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
};

// When to stop waiting; none: never.
struct Deadline {
  std::optional<std::chrono::steady_clock::time_point> at;
  static Deadline after(double seconds); // 0: none
  bool passed() const { return at && std::chrono::steady_clock::now() >= *at; }
  // How long a poll may wait now: at most millis_max, 0 once passed.
  int millis(int millis_max) const;
};

// How a process ended: waitpid's status.
struct ProcessEnd {
  int status = 0;
  bool signaled() const { return WIFSIGNALED(status); }
  int signal() const { return signaled() ? WTERMSIG(status) : 0; }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  // "killed by SIGSEGV (invalid memory reference)", "exited with code 3", "stopped".
  std::string describe() const;
};

// "SIGSEGV (invalid memory reference)", "SIGABRT (aborted)", "signal 42".
std::string signal_description(int signal);

// A descriptor the child gets: one end of a new pipe (we keep the other), or one of ours.
struct ChildFd {
  std::vector<int> at;      // the child's numbers for it (stdout and stderr on one pipe: 1, 2)
  bool child_writes = true; // a pipe we read; false: a pipe we write
  int ours = -1;            // >= 0: this descriptor of ours instead of a pipe (a log file)
};

struct SpawnOptions {
  std::string program;                  // its path (no PATH search)
  std::vector<std::string> argv;        // argv[0] included
  std::vector<std::string> environment; // NAME=value, set over this process's own
  std::vector<ChildFd> fds;
  bool own_group = false;               // its own process group: kill() ends what it started too
  std::vector<int> default_signals;     // given their default action back (SIGPIPE we ignore)
  std::vector<int> blocked_signals;     // its signal mask; none: ours
  std::string what = "a child process"; // for errors: "case workers"
};

// posix_spawn could not start the program (missing, not executable): errno in code().
struct SpawnFailure : std::system_error {
  using std::system_error::system_error;
};

class Child {
public:
  Child() = default; // no process
  // posix_spawn; SpawnFailure, or std::system_error when no pipe can be made.
  static Child spawn(const SpawnOptions& options);
  // fork (flushing stdio first, or buffered output is written twice); the child runs
  // body(ends), each of `fds`'s ends in the child (moved to its first `at`, or where it is when
  // `at` is empty), and exits 127 should body return. std::system_error when it cannot fork.
  static Child fork(const std::vector<ChildFd>& fds,
                    const std::function<void(std::span<const int> ends)>& body,
                    std::string_view what);
  ~Child(); // kills and reaps a process still running
  Child(Child&& other) noexcept { *this = std::move(other); }
  // Swaps: a process this held ends with `other` (a temporary: at once).
  Child& operator=(Child&& other) noexcept;

  bool running() const { return pid_ > 0 && !end_; }
  // Our end of the pipe of fds[i] (-1 once closed, or for one of ours).
  int fd(std::size_t i) const { return i < ends_.size() ? ends_[i].get() : -1; }
  void close(std::size_t i) {
    if (i < ends_.size()) ends_[i].reset();
  }
  void close_all() { ends_.clear(); }

  // Reaps it if it has ended, waiting up to `millis` for that; nullopt while it runs.
  std::optional<ProcessEnd> wait_for(int millis);
  // SIGKILL to it, or to its group (a group outlives its leader: leftovers too, once reaped).
  void kill();
  // Waits up to `millis` for it to end, then kills it; its end.
  ProcessEnd reap(int millis = 0);
  // Waits for it to end, however long that takes.
  ProcessEnd wait();

private:
  pid_t pid_ = -1;
  bool own_group_ = false;
  std::optional<ProcessEnd> end_;
  std::vector<Fd> ends_;
};

// `text` as one word for /bin/sh: 'it'\''s'.
std::string shell_quote(std::string_view text);

// At most 300 bytes of what a worker said or was started with, control characters as spaces
// ("..." after a cut), to quote in a message.
std::string excerpt(std::string_view text);

// Writes all of `data`; false when the reader is gone.
bool write_all(int fd, std::string_view data) noexcept;

enum class ReadEnd : std::uint8_t { bytes, line, closed, nothing, timed_out, too_long, failed };
// One read(2) of what `fd` holds, appended to `out`: bytes, closed (end of input or an
// error), or nothing (interrupted, or nothing there: our ends of a child's output pipes do not
// block).
ReadEnd read_some(int fd, std::string& out);
// Reads into `buffer` until it holds a line: `line`, without its "\n" (nor "\r"), taken off it.
// Else closed, timed_out, too_long (`buffer` holds more than bytes_max and no line) or failed
// (poll failed: errno says why).
ReadEnd read_line(int fd, std::string& buffer, std::string& line, const Deadline& deadline,
                  std::size_t bytes_max);
// Whether `fd` has input (or its end) now.
bool readable_now(int fd);

// In a child: killed (SIGKILL) when the thread that started it ends, so that a parent
// interrupted on a terminal leaves no child; false when `parent` is gone already.
bool die_with_parent(pid_t parent);

} // namespace mc::model
