#include "fuzz/case_workers.h"

#include "fuzz/isolate_frames.h"
#include "model/errors.h"
#include "model/interrupt.h"
#include "model/process.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>
#include <system_error>

namespace mc::fuzz {
namespace {

constexpr char kSetup = 'S'; // campaign -> worker: the setup, JSON
constexpr char kCase = 'C';  // campaign -> worker: a case index, int64
constexpr int kResultsFd = 3;
// The worker's pipes (model::Child::fd): its stdin, its fd 3, its stdout and stderr.
constexpr std::size_t kCommands = 0;
constexpr std::size_t kResults = 1;
constexpr std::size_t kErrors = 2;

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
constexpr int kExitWaitMillis = 5000; // for a worker to end after its input is closed
constexpr int kExitParentGone = 121;  // the worker found the campaign gone before it started
constexpr std::size_t kSetupBytesMax = 16 << 20;
// How long a worker may take to start and read its setup (a CUDA context, an adapter that
// imports torch) at least, whatever a case may take: the case timeout where that is longer.
constexpr double kReadySecondsMin = 120.0;

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
  model::Deadline deadline; // set once its worker is ready and starts it
  IsolatedOutcome outcome;
};

struct CaseWorkerPool::Worker {
  int slot = 0;
  model::Child child; // none running: no process in this slot (one starts when a case needs it)
  bool ready = false;
  model::Deadline ready_deadline;
  std::string bytes;           // frames read, not yet taken
  std::string stderr_text;     // what it wrote during the case it runs
  std::deque<Flight*> queue;   // the cases given to it, in order: it runs the first
  std::int64_t generation = 0; // processes started in this slot
  bool alive() const { return child.running(); }
};

CaseWorkerPool::CaseWorkerPool(CaseWorkerStart start, int jobs) : start_(std::move(start)) {
  MC_ASSERT(jobs >= 1);
  MC_ASSERT(!start_.command.empty());
  MC_ASSERT(start_.options.timeout_seconds >= 0 && start_.options.payload_bytes_max > 0);
  setup_text_ = frames::frame_bytes(kSetup, start_.setup.dump());
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
    w->child.close(kCommands);
  for (const std::unique_ptr<Worker>& w : workers_)
    if (w->alive()) end_worker(*w, false);
}

void CaseWorkerPool::spawn(Worker& w) {
  MC_ASSERT(!w.alive() && w.queue.empty());
  std::vector<std::string> args = start_.command;
  args.push_back("--parent");
  args.push_back(std::to_string(getpid()));
  try {
    w.child = model::Child::spawn(
        {.program = args[0],
         .argv = args,
         .environment =
             start_.environment.empty()
                 ? std::vector<std::string>{}
                 : start_.environment[static_cast<std::size_t>(w.slot) % start_.environment.size()],
         .fds = {{.at = {STDIN_FILENO}, .child_writes = false},
                 {.at = {kResultsFd}},
                 {.at = {STDOUT_FILENO, STDERR_FILENO}}},
         .default_signals = {SIGPIPE}, // ignored here (above); the worker gets the default back
         // Blocked until the worker ignores them (serve_case_worker): Ctrl-C reaches the whole
         // process group, and a worker still starting (a sanitized build takes a second) would
         // die of it before it is ready, which ends the campaign as an environment failure with
         // no report.
         .blocked_signals = {SIGINT, SIGTERM},
         .what = "case workers"});
  } catch (const model::SpawnFailure& e) {
    throw model::EnvironmentError(
        fmt::format("cannot start a case worker ({}): {}", args[0], e.code().message()));
  }
  ++workers_started_;
  ++w.generation;
  w.ready_deadline = model::Deadline::after(ready_seconds());
  // A worker that dies before it reads this shows as the end of its results.
  model::write_all(w.child.fd(kCommands), setup_text_);
}

void CaseWorkerPool::end_worker(Worker& w, bool kill_it) {
  w.child.close(kCommands);
  if (w.alive()) {
    if (kill_it) w.child.kill();
    w.child.reap(kill_it ? 0 : kExitWaitMillis);
  }
  w.child = model::Child();
  for (Flight* f : w.queue)
    f->worker = nullptr;
  w.queue.clear();
  w.ready = false;
  w.ready_deadline = {};
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
  while (w->alive() && w->queue.empty() && model::readable_now(w->child.fd(kResults)))
    read_results(*w);
  if (!w->alive()) spawn(*w);
  auto flight = std::make_unique<Flight>();
  flight->index = index;
  send_case(*w, *flight);
  flights_.push_back(std::move(flight));
}

void CaseWorkerPool::send_case(Worker& w, Flight& flight) {
  MC_ASSERT(w.alive() && w.queue.size() < kQueuedPerWorkerMax);
  flight.worker = &w;
  flight.deadline = {};
  w.queue.push_back(&flight);
  arm(w);
  std::string data(sizeof flight.index, '\0');
  std::memcpy(data.data(), &flight.index, sizeof flight.index);
  // A worker that died on the way shows as the end of its results: the case's outcome.
  model::write_all(w.child.fd(kCommands), frames::frame_bytes(kCase, data));
}

void CaseWorkerPool::arm(Worker& w) {
  if (!w.ready || w.queue.empty() || w.queue.front()->deadline.at) return;
  w.queue.front()->deadline = model::Deadline::after(start_.options.timeout_seconds);
}

void CaseWorkerPool::finish_front(Worker& w, frames::CaseEnd end) {
  MC_ASSERT(!w.queue.empty());
  Flight* flight = w.queue.front();
  w.queue.pop_front();
  end.frames = std::move(flight->frames);
  end.stderr_text = std::move(w.stderr_text);
  flight->outcome = frames::classify(std::move(end), start_.options);
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
  const model::ReadEnd got = model::read_some(w.child.fd(kResults), w.bytes);
  if (got == model::ReadEnd::closed) worker_gone(w);
  if (got == model::ReadEnd::bytes) take_frames(w);
}

void CaseWorkerPool::read_errors(Worker& w) {
  std::string chunk;
  const model::ReadEnd got = model::read_some(w.child.fd(kErrors), chunk);
  if (got == model::ReadEnd::closed) // its output closed: it is ending; its results say how
    w.child.close(kErrors);
  else if (w.queue.empty())
    w.stderr_text = std::move(chunk); // kept for a worker that ends before it is ready
  else if (w.stderr_text.size() < kIsolatedStderrBytesMax)
    w.stderr_text.append(chunk, 0, kIsolatedStderrBytesMax - w.stderr_text.size());
}

// Reads what a worker's stdout and stderr hold now: what it wrote before the frame just read
// (or before it ended) is there already.
void CaseWorkerPool::drain_errors(Worker& w) {
  while (w.child.fd(kErrors) >= 0 && model::readable_now(w.child.fd(kErrors)))
    read_errors(w);
}

void CaseWorkerPool::take_frames(Worker& w) {
  const std::size_t frames_max = frames::frames_bytes_max(start_.options);
  while (w.alive()) {
    std::optional<frames::Frame> frame = frames::take_frame(w.bytes);
    if (!frame) {
      if (!w.queue.empty() && w.bytes.size() > frames_max) {
        w.child.kill();
        finish_front(w, {.too_big = true});
        replace(w, true);
      }
      return;
    }
    switch (frame->tag) {
    case frames::kReady:
      w.ready = true;
      w.ready_deadline = {};
      arm(w);
      break;
    case frames::kPayload:
    case frames::kThrew: {
      if (w.queue.empty()) break;
      w.queue.front()->frames.add(std::move(*frame));
      drain_errors(w);
      finish_front(w, {});
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
  const model::ProcessEnd ended = w.child.reap(kExitWaitMillis);
  drain_errors(w);
  if (!w.ready) {
    const std::string said = last_line(w.stderr_text);
    end_worker(w, false);
    throw model::EnvironmentError(fmt::format("a case worker ({}) {} before it was ready{}",
                                              start_.command.front(), ended.describe(),
                                              said.empty() ? "" : fmt::format(": \"{}\"", said)));
  }
  if (!w.queue.empty()) finish_front(w, {.status = ended.status, .exited = true});
  replace(w, false);
}

void CaseWorkerPool::check_deadlines() {
  for (const std::unique_ptr<Worker>& w : workers_) {
    if (!w->alive()) continue;
    if (w->ready_deadline.passed()) {
      end_worker(*w, true);
      throw model::EnvironmentError(fmt::format("a case worker ({}) did not get ready within {} s",
                                                start_.command.front(), ready_seconds()));
    }
    if (w->queue.empty() || !w->queue.front()->deadline.passed()) continue;
    w->child.kill();
    finish_front(*w, {.timed_out = true});
    replace(*w, true);
  }
}

int CaseWorkerPool::poll_millis() const {
  int millis = kPollMillisMax;
  for (const std::unique_ptr<Worker>& w : workers_)
    millis = !w->queue.empty() && w->queue.front()->deadline.at
                 ? w->queue.front()->deadline.millis(millis)
                 : w->ready_deadline.millis(millis);
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
    fds.push_back(pollfd{.fd = w->child.fd(kResults), .events = POLLIN, .revents = 0});
    owners.push_back({w.get(), w->generation, true});
    if (w->child.fd(kErrors) >= 0) {
      fds.push_back(pollfd{.fd = w->child.fd(kErrors), .events = POLLIN, .revents = 0});
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
    else if (w.child.fd(kErrors) >= 0)
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
    if (model::read_some(STDIN_FILENO, buffer) == model::ReadEnd::closed) return std::nullopt;
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
  if (!model::die_with_parent(parent)) return kExitParentGone;
  // Ctrl-C reaches the whole process group: the case finishes, and the campaign stops after it.
  // The pool started this worker with both blocked; ignored now, what came meanwhile is dropped.
  model::ignore_interrupts();
  sigset_t interrupts;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  sigaddset(&interrupts, SIGTERM);
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
