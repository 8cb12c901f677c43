#include "fuzz/case_workers.h"

#include "fuzz/isolate_frames.h"
#include "model/errors.h"
#include "model/interrupt.h"

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
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>

extern char** environ;

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kSetup = 'S'; // campaign -> worker: the setup, JSON
constexpr char kCase = 'C';  // campaign -> worker: a case index, int64
constexpr int kResultsFd = 3;
constexpr int kLowestPipeFd = 10; // pipes kept above the descriptors a worker is given

// SIGINT and SIGTERM: the campaign's to act on, never a worker's.
sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
// Finished cases kept waiting behind a slow older one, per job. Case times have a heavy tail
// (at default sizes the slowest 1 % of cases take a fifth of the time, 17-50 ms against a
// median of 0.2 ms), and while one of them runs the other workers go on only as far as this
// window lets them: with 8 a job, 16 workers were held to 8x one (a simulation of the pool on
// 20,000 measured case times; 3,603 cases/s measured against 5,935 for 16 shard processes).
// With 256 the window covers the tail, and the bytes held are bounded on their own below.
constexpr std::size_t kWaitingPerJobMax = 256;
// Payload bytes of finished cases waiting to be taken: a bound whatever their number.
constexpr std::size_t kWaitingBytesMax = std::size_t{256} << 20;
// Cases given to one worker at once: the one it runs and the next, already in its input, so
// that it starts that one as soon as it has answered instead of waiting for this process to
// read the answer and send another (a round trip of two wake-ups a case).
constexpr std::size_t kQueuedPerWorkerMax = 2;
constexpr int kPollMillisMax = 50;
constexpr std::size_t kReadChunkBytes = 64 << 10;
constexpr int kExitWaitMillis = 5000; // for a worker to end after its input is closed
constexpr int kExitParentGone = 121;  // the worker found the campaign gone before it started
constexpr std::size_t kSetupBytesMax = 16 << 20;
// How long a worker may take to start and read its setup (a CUDA context, an adapter that
// imports torch) at least, whatever a case may take: the case timeout where that is longer.
constexpr double kReadySecondsMin = 120.0;

// Moves `fd` to kLowestPipeFd or above (close-on-exec), so that the descriptors a worker is
// given (0 to 3) never collide with a pipe's own.
int high_fd(int fd) {
  if (fd >= kLowestPipeFd) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, kLowestPipeFd);
  const int error = errno;
  close(fd);
  if (moved < 0) throw std::system_error(error, std::generic_category(), "case workers: fcntl");
  return moved;
}

struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
};

Pipe make_pipe() {
  int fds[2] = {-1, -1};
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "case workers: pipe2");
  return Pipe{.read_fd = high_fd(fds[0]), .write_fd = high_fd(fds[1])};
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string frame_bytes(char tag, std::string_view data) {
  std::string out(frames::kHeaderBytes, '\0');
  out[0] = tag;
  const std::uint64_t length = data.size();
  std::memcpy(out.data() + 1, &length, sizeof length);
  out.append(data);
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

std::string exit_description(int status) {
  if (WIFSIGNALED(status)) return fmt::format("killed by {}", signal_name(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return "stopped";
}

// The last non-empty line of a worker's output, for a message.
std::string last_line(std::string_view text) {
  std::string_view last;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) last = line;
    at = end + 1;
  }
  return std::string(last.substr(0, 300));
}

// Reads what a worker's stdout and stderr hold now: what it wrote before the frame just read
// (or before it ended) is there already.
// `fd` is the worker's descriptor itself: read_once closes it (-1) at the end of its output.
void drain(const int& fd, const std::function<void()>& read_once) {
  while (fd >= 0) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 0) <= 0) return;
    read_once();
  }
}

// Waits for `pid` up to `millis`, then kills it; its status.
int reap(pid_t pid, int millis) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(millis);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || done < 0) return status;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

// What a finished case's outcome holds while it waits to be taken (kWaitingBytesMax).
std::size_t held_bytes(const IsolatedOutcome& outcome) {
  return outcome.payload.size() + outcome.message.size() + outcome.stderr_text.size();
}

} // namespace

struct CaseWorkerPool::Flight {
  std::int64_t index = 0;
  Worker* worker = nullptr; // running it or about to; null once done
  bool done = false;
  frames::CaseFrames frames;
  std::optional<Clock::time_point> deadline; // set once its worker is ready and starts it
  IsolatedOutcome outcome;
};

struct CaseWorkerPool::Worker {
  int slot = 0;
  pid_t pid = -1;    // -1: no process in this slot (one starts when a case needs it)
  int commands = -1; // its stdin
  int results = -1;  // its fd 3
  int errors = -1;   // its stdout and stderr
  bool ready = false;
  std::optional<Clock::time_point> ready_deadline;
  std::string bytes;           // frames read, not yet taken
  std::string stderr_text;     // what it wrote during the case it runs
  std::deque<Flight*> queue;   // the cases given to it, in order: it runs the first
  std::int64_t generation = 0; // processes started in this slot
  bool alive() const { return pid > 0; }
};

CaseWorkerPool::CaseWorkerPool(CaseWorkerStart start, int jobs) : start_(std::move(start)) {
  MC_ASSERT(jobs >= 1);
  MC_ASSERT(!start_.command.empty());
  MC_ASSERT(start_.options.timeout_seconds >= 0 && start_.options.payload_bytes_max > 0);
  setup_text_ = frame_bytes(kSetup, start_.setup.dump());
  MC_ASSERT(setup_text_.size() <= kSetupBytesMax);
  // A worker that dies while we write to it must be a case's outcome, not our death.
  ::signal(SIGPIPE, SIG_IGN);
  for (int k = 0; k < jobs; ++k) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->slot = k;
  }
  for (const std::unique_ptr<Worker>& w : workers_)
    spawn(*w);
}

CaseWorkerPool::~CaseWorkerPool() {
  // Idle workers end when their input closes; one still running a case (the campaign is
  // unwinding) is killed.
  for (const std::unique_ptr<Worker>& w : workers_)
    if (w->alive() && !w->queue.empty()) end_worker(*w, true);
  for (const std::unique_ptr<Worker>& w : workers_)
    if (w->commands >= 0) {
      close(w->commands);
      w->commands = -1;
    }
  for (const std::unique_ptr<Worker>& w : workers_)
    if (w->alive()) end_worker(*w, false);
}

void CaseWorkerPool::spawn(Worker& w) {
  MC_ASSERT(!w.alive() && w.queue.empty());
  const Pipe commands = make_pipe();
  const Pipe results = make_pipe();
  const Pipe errors = make_pipe();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, commands.read_fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, results.write_fd, kResultsFd);
  posix_spawn_file_actions_adddup2(&actions, errors.write_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, errors.write_fd, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE); // ignored here (above); the worker gets the default back
  // Blocked until the worker ignores them (serve_case_worker): Ctrl-C reaches the whole process
  // group, and a worker still starting (a sanitized build takes a second) would die of it before
  // it is ready, which ends the campaign as an environment failure with no report.
  const sigset_t interrupts = interrupt_signals();
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &interrupts);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> args = start_.command;
  args.push_back("--parent");
  args.push_back(std::to_string(getpid()));
  std::vector<std::string> env = environment_with(
      start_.environment.empty()
          ? std::vector<std::string>{}
          : start_.environment[static_cast<std::size_t>(w.slot) % start_.environment.size()]);
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(commands.read_fd);
  close(results.write_fd);
  close(errors.write_fd);
  if (spawned != 0) {
    for (const int fd : {commands.write_fd, results.read_fd, errors.read_fd})
      close(fd);
    throw model::EnvironmentError(
        fmt::format("cannot start a case worker ({}): {}", args[0], std::strerror(spawned)));
  }
  ++workers_started_;
  ++w.generation;
  w.pid = pid;
  w.commands = commands.write_fd;
  w.results = results.read_fd;
  w.errors = errors.read_fd;
  w.ready = false;
  w.bytes.clear();
  w.stderr_text.clear();
  w.ready_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(ready_seconds()));
  // A worker that dies before it reads this shows as the end of its results.
  write_all(w.commands, setup_text_);
}

void CaseWorkerPool::end_worker(Worker& w, bool kill_it) {
  if (w.commands >= 0) close(w.commands);
  if (w.alive()) {
    if (kill_it) kill(w.pid, SIGKILL);
    reap(w.pid, kill_it ? 0 : kExitWaitMillis);
  }
  for (int* fd : {&w.results, &w.errors})
    if (*fd >= 0) close(*fd);
  w.pid = -1;
  w.commands = w.results = w.errors = -1;
  for (Flight* f : w.queue)
    f->worker = nullptr;
  w.queue.clear();
  w.ready = false;
  w.ready_deadline.reset();
  w.bytes.clear();
  w.stderr_text.clear();
}

double CaseWorkerPool::ready_seconds() const {
  return std::max(start_.options.timeout_seconds, kReadySecondsMin);
}

bool CaseWorkerPool::oldest_done() const {
  return !flights_.empty() && flights_.front()->done;
}

bool CaseWorkerPool::has_room() const {
  if (flights_.size() >= kWaitingPerJobMax * workers_.size()) return false;
  if (waiting_bytes_ >= kWaitingBytesMax) return false;
  return std::ranges::any_of(workers_, [](const std::unique_ptr<Worker>& w) {
    return w->queue.size() < kQueuedPerWorkerMax;
  });
}

void CaseWorkerPool::start(std::int64_t index) {
  MC_ASSERT(has_room());
  // The worker with the fewest cases given (the first of them): idle workers first.
  Worker* w = nullptr;
  for (const std::unique_ptr<Worker>& candidate : workers_)
    if (w == nullptr || candidate->queue.size() < w->queue.size()) w = candidate.get();
  // An idle worker that died meanwhile (killed from outside) is noticed before the case is
  // given to it, so the case is not blamed for it.
  if (w->alive() && w->queue.empty()) {
    pollfd p{.fd = w->results, .events = POLLIN, .revents = 0};
    while (w->alive() && poll(&p, 1, 0) > 0)
      read_results(*w);
  }
  if (!w->alive()) spawn(*w);
  auto flight = std::make_unique<Flight>();
  flight->index = index;
  send_case(*w, *flight);
  flights_.push_back(std::move(flight));
}

void CaseWorkerPool::send_case(Worker& w, Flight& flight) {
  MC_ASSERT(w.alive() && w.queue.size() < kQueuedPerWorkerMax);
  flight.worker = &w;
  flight.deadline.reset();
  w.queue.push_back(&flight);
  arm(w);
  std::string data(sizeof flight.index, '\0');
  std::memcpy(data.data(), &flight.index, sizeof flight.index);
  // A worker that died on the way shows as the end of its results: the case's outcome.
  write_all(w.commands, frame_bytes(kCase, data));
}

void CaseWorkerPool::arm(Worker& w) {
  if (!w.ready || w.queue.empty() || w.queue.front()->deadline) return;
  if (start_.options.timeout_seconds > 0)
    w.queue.front()->deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(start_.options.timeout_seconds));
}

void CaseWorkerPool::finish_front(Worker& w, IsolatedOutcome outcome) {
  MC_ASSERT(!w.queue.empty());
  Flight* flight = w.queue.front();
  w.queue.pop_front();
  flight->outcome = std::move(outcome);
  flight->done = true;
  waiting_bytes_ += held_bytes(flight->outcome);
  flight->worker = nullptr;
  w.stderr_text.clear();
  arm(w); // the next case given to it starts now
}

void CaseWorkerPool::replace(Worker& w, bool kill_it) {
  // The cases given to it after the one it ended on never ran there: its successor runs them.
  const std::vector<Flight*> waiting(w.queue.begin(), w.queue.end());
  w.queue.clear();
  end_worker(w, kill_it);
  if (waiting.empty()) return; // a fresh one starts when a case needs it
  spawn(w);
  for (Flight* f : waiting)
    send_case(w, *f);
}

void CaseWorkerPool::read_results(Worker& w) {
  char chunk[kReadChunkBytes];
  const ssize_t got = read(w.results, chunk, sizeof chunk);
  if (got < 0 && errno == EINTR) return;
  if (got <= 0) {
    worker_gone(w);
    return;
  }
  w.bytes.append(chunk, static_cast<std::size_t>(got));
  take_frames(w);
}

void CaseWorkerPool::read_errors(Worker& w) {
  char chunk[kReadChunkBytes];
  const ssize_t got = read(w.errors, chunk, sizeof chunk);
  if (got < 0 && errno == EINTR) return;
  if (got <= 0) { // its output closed: it is ending; its results say how
    close(w.errors);
    w.errors = -1;
    return;
  }
  const auto bytes = static_cast<std::size_t>(got);
  if (w.queue.empty())
    w.stderr_text.assign(chunk, bytes); // kept for a worker that ends before it is ready
  else if (w.stderr_text.size() < kIsolatedStderrBytesMax)
    w.stderr_text.append(chunk, std::min(bytes, kIsolatedStderrBytesMax - w.stderr_text.size()));
}

void CaseWorkerPool::take_frames(Worker& w) {
  const std::size_t frames_max = static_cast<std::size_t>(start_.options.payload_bytes_max) +
                                 2 * frames::kHeaderBytes + sizeof(frames::FaultRecord);
  while (w.alive()) {
    std::optional<frames::Frame> frame = frames::take_frame(w.bytes);
    if (!frame) {
      if (!w.queue.empty() && w.bytes.size() > frames_max) {
        frames::CaseEnd end{.frames = std::move(w.queue.front()->frames),
                            .stderr_text = std::move(w.stderr_text),
                            .too_big = true};
        kill(w.pid, SIGKILL);
        finish_front(w, frames::classify(std::move(end), start_.options));
        replace(w, true);
      }
      return;
    }
    switch (frame->tag) {
    case frames::kReady:
      w.ready = true;
      w.ready_deadline.reset();
      arm(w);
      break;
    case frames::kPayload:
    case frames::kThrew: {
      if (w.queue.empty()) break;
      w.queue.front()->frames.add(std::move(*frame));
      drain(w.errors, [&] { read_errors(w); });
      frames::CaseEnd end{.frames = std::move(w.queue.front()->frames),
                          .stderr_text = std::move(w.stderr_text)};
      finish_front(w, frames::classify(std::move(end), start_.options));
      break;
    }
    case frames::kRetire:
      replace(w, false);
      return;
    case frames::kFatal:
      end_worker(w, true);
      throw model::EnvironmentError(frame->data);
    default:
      if (!w.queue.empty()) w.queue.front()->frames.add(std::move(*frame));
      break;
    }
  }
}

void CaseWorkerPool::worker_gone(Worker& w) {
  const int status = reap(w.pid, kExitWaitMillis);
  w.pid = -1;
  drain(w.errors, [&] { read_errors(w); });
  if (!w.ready) {
    const std::string said = last_line(w.stderr_text);
    end_worker(w, false);
    throw model::EnvironmentError(fmt::format("a case worker ({}) {} before it was ready{}",
                                              start_.command.front(), exit_description(status),
                                              said.empty() ? "" : fmt::format(": \"{}\"", said)));
  }
  if (!w.queue.empty()) {
    frames::CaseEnd end{.frames = std::move(w.queue.front()->frames),
                        .stderr_text = std::move(w.stderr_text),
                        .status = status,
                        .exited = true};
    finish_front(w, frames::classify(std::move(end), start_.options));
  }
  replace(w, false);
}

void CaseWorkerPool::check_deadlines() {
  const Clock::time_point now = Clock::now();
  for (const std::unique_ptr<Worker>& w : workers_) {
    if (!w->alive()) continue;
    if (w->ready_deadline && now >= *w->ready_deadline) {
      end_worker(*w, true);
      throw model::EnvironmentError(fmt::format("a case worker ({}) did not get ready within {} s",
                                                start_.command.front(), ready_seconds()));
    }
    if (w->queue.empty() || !w->queue.front()->deadline || now < *w->queue.front()->deadline)
      continue;
    frames::CaseEnd end{.frames = std::move(w->queue.front()->frames),
                        .stderr_text = std::move(w->stderr_text),
                        .timed_out = true};
    kill(w->pid, SIGKILL);
    finish_front(*w, frames::classify(std::move(end), start_.options));
    replace(*w, true);
  }
}

int CaseWorkerPool::poll_millis() const {
  int millis = kPollMillisMax;
  const Clock::time_point now = Clock::now();
  for (const std::unique_ptr<Worker>& w : workers_) {
    std::optional<Clock::time_point> deadline = w->ready_deadline;
    if (!w->queue.empty() && w->queue.front()->deadline) deadline = w->queue.front()->deadline;
    if (!deadline) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
    millis = static_cast<int>(std::clamp<std::int64_t>(left.count() + 1, 0, millis));
  }
  return millis;
}

void CaseWorkerPool::wait() {
  check_deadlines();
  struct Owner {
    Worker* worker;
    std::int64_t generation;
    bool results; // else its stdout and stderr
  };
  std::vector<pollfd> fds;
  std::vector<Owner> owners;
  for (const std::unique_ptr<Worker>& w : workers_) {
    if (!w->alive()) continue;
    fds.push_back(pollfd{.fd = w->results, .events = POLLIN, .revents = 0});
    owners.push_back({w.get(), w->generation, true});
    if (w->errors >= 0) {
      fds.push_back(pollfd{.fd = w->errors, .events = POLLIN, .revents = 0});
      owners.push_back({w.get(), w->generation, false});
    }
  }
  if (fds.empty()) return;
  const int ready = poll(fds.data(), fds.size(), poll_millis());
  if (ready < 0 && errno != EINTR)
    throw std::system_error(errno, std::generic_category(), "case workers: poll");
  for (std::size_t i = 0; ready > 0 && i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Worker& w = *owners[i].worker;
    // It ended, or ended and was replaced, while an earlier descriptor was read: what its
    // successor's descriptors hold is read next time.
    if (!w.alive() || w.generation != owners[i].generation) continue;
    if (owners[i].results)
      read_results(w);
    else if (w.errors >= 0)
      read_errors(w);
  }
  check_deadlines();
}

void CaseWorkerPool::settle() {
  while (std::ranges::any_of(flights_, [](const std::unique_ptr<Flight>& f) { return !f->done; }))
    wait();
}

IsolatedOutcome CaseWorkerPool::take_oldest() {
  MC_ASSERT(!flights_.empty());
  while (!oldest_done())
    wait();
  IsolatedOutcome out = std::move(flights_.front()->outcome);
  flights_.pop_front();
  waiting_bytes_ -= held_bytes(out);
  return out;
}

void CaseWorkerPool::clear() {
  for (const std::unique_ptr<Flight>& f : flights_)
    if (!f->done && f->worker != nullptr) end_worker(*f->worker, true);
  flights_.clear();
  waiting_bytes_ = 0;
}

// --- The worker's side

namespace {

// The next frame from the campaign; nothing at the end of its input.
std::optional<frames::Frame> next_command(std::string& buffer) {
  for (;;) {
    if (std::optional<frames::Frame> frame = frames::take_frame(buffer)) return frame;
    char chunk[4096];
    const ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer.append(chunk, static_cast<std::size_t>(n));
    if (buffer.size() > kSetupBytesMax) return std::nullopt;
  }
}

int fatal(std::string_view message) {
  frames::send(frames::kFatal, message);
  return 1;
}

} // namespace

int serve_case_worker(pid_t parent,
                      const std::function<CaseWorkerJob(const nlohmann::json& setup)>& make_job) {
  if (fcntl(kResultsFd, F_GETFD) < 0) {
    std::fprintf(stderr, "mambacheck: error: case-worker runs the cases of a fuzz campaign, "
                         "which starts it; it is not run by hand\n");
    return 2;
  }
  // Nothing this worker starts (an external adapter) may hold the campaign's pipe open.
  fcntl(kResultsFd, F_SETFD, FD_CLOEXEC);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return kExitParentGone;
  // Ctrl-C reaches the whole process group: the case finishes, and the campaign stops after it.
  // The pool started this worker with both blocked; ignored now, what came meanwhile is dropped.
  model::ignore_interrupts();
  const sigset_t interrupts = interrupt_signals();
  sigprocmask(SIG_UNBLOCK, &interrupts, nullptr);
  frames::set_result_fd(kResultsFd);
  frames::install_crash_handler();
  std::string buffer;
  const std::optional<frames::Frame> setup = next_command(buffer);
  if (!setup) return 0;
  if (setup->tag != kSetup) return fatal("case worker: expected the setup first");
  CaseWorkerJob job;
  try {
    job = make_job(nlohmann::json::parse(setup->data));
  } catch (const CaseWorkerFatal& f) {
    return fatal(f.message);
  } catch (const std::exception& e) {
    return fatal(fmt::format("case worker: {}", e.what()));
  }
  frames::send(frames::kReady, {});
  while (const std::optional<frames::Frame> command = next_command(buffer)) {
    std::int64_t index = 0;
    if (command->tag != kCase || command->data.size() != sizeof index)
      return fatal("case worker: expected a case index");
    std::memcpy(&index, command->data.data(), sizeof index);
    try {
      const std::string payload = job.run(index);
      std::cout.flush();
      std::fflush(nullptr);
      frames::send(frames::kPayload, payload);
    } catch (const CaseWorkerFatal& f) {
      return fatal(f.message);
    } catch (const std::exception& e) {
      frames::send(frames::kThrew, e.what());
    } catch (...) {
      frames::send(frames::kThrew, "an exception that is not a std::exception");
    }
    if (job.must_retire && job.must_retire()) {
      frames::send(frames::kRetire, {});
      return 0;
    }
  }
  return 0;
}

} // namespace mc::fuzz
