// Case workers: the processes a campaign runs its cases in, `jobs` at a time.
//
// A worker is this program started again (fork and exec of /proc/self/exe with a hidden
// subcommand), so it is a clean process whatever the campaign's process holds: a CUDA context
// (a child forked from a process that initialised CUDA cannot use CUDA; one that exec'd can),
// gigabytes of a finding being shrunk. It reads the campaign's options once (the setup), then
// case indices, draws each case as the campaign would, runs it and sends back the same frames a
// forked child sends (fuzz/isolate_frames.h). The pool gives cases to idle workers in case
// order and hands the outcomes back in that order, whatever order they finish in: what a case
// gives does not depend on the worker that ran it, so the report is the same for any number.
//
// A worker that dies on a case (a kernel that wrote out of bounds), runs past the timeout, or
// writes too much is that case's outcome, the same one a forked child gives ("killed by
// SIGSEGV ... at address 0x... (12 bytes past the end of arena 0 (...))", "exceeded 300 s;
// killed"); the pool starts a fresh worker in its place for the next case. A worker that
// cannot start or says it cannot go on (kFatal: an external adapter that cannot be started)
// ends the campaign with model::EnvironmentError (exit 3).
//
// Protocol: the worker's stdin carries frames from the campaign (kSetup once, then kCase with
// an int64 index; end of input: exit), fd 3 carries its frames back, and its stdout and
// stderr go to one pipe the pool keeps, per case, for the crash message. A worker ignores
// SIGINT and SIGTERM (the campaign decides when to stop, after the cases in flight) and dies
// with the campaign (PR_SET_PDEATHSIG).
#pragma once

#include "fuzz/isolate.h"
#include "fuzz/isolate_frames.h"

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mc::fuzz {

// How the campaign starts its workers.
struct CaseWorkerStart {
  // The program and its arguments (this program's hidden subcommand); the pool adds
  // `--parent PID`.
  std::vector<std::string> command;
  // Variables set for worker k (NAME=value): environment[k % size], none when empty. A GPU per
  // worker goes here (CUDA_VISIBLE_DEVICES).
  std::vector<std::vector<std::string>> environment;
  // What every worker reads before its first case: the campaign's options, and the backend as
  // the command describes it (what the worker needs to make its runner).
  nlohmann::json setup = nlohmann::json::object();
  // Per case: the timeout (from when the worker is ready; starting and reading the setup may
  // take at least 120 s, or this timeout where it is longer) and the payload bound.
  IsolateOptions options;
};

class CaseWorkerPool {
public:
  CaseWorkerPool(CaseWorkerStart start, int jobs); // starts `jobs` workers
  ~CaseWorkerPool(); // ends every worker (closing its input; killed if it lingers)
  CaseWorkerPool(const CaseWorkerPool&) = delete;
  CaseWorkerPool& operator=(const CaseWorkerPool&) = delete;

  int jobs() const { return static_cast<int>(workers_.size()); }
  // Another case may start: a worker has fewer than two cases given (the one it runs and the
  // next, waiting in its input), and not too many outcomes wait behind an older case still
  // running.
  bool has_room() const;
  // No case left whose outcome has not been taken.
  bool empty() const { return flights_.empty(); }
  // Gives case `index` to the worker with the fewest cases given, idle ones first (starting one
  // where a worker ended). A case given to a worker that then ends before starting it (it died
  // on the case before, ran past its timeout, retired) goes to the worker that replaces it.
  void start(std::int64_t index);
  // The oldest case not yet taken is done.
  bool oldest_done() const;
  // Waits until some case is done (or a worker's state changes), reading what workers send.
  void wait();
  // Waits until no case is running.
  void settle();
  // The oldest case's outcome; waits for it.
  IsolatedOutcome take_oldest();
  // Drops every case not taken yet: their workers are killed (fresh ones start when needed).
  void clear();
  // Worker processes started so far, replacements included.
  std::int64_t workers_started() const { return workers_started_; }

private:
  struct Flight;
  struct Worker;

  void spawn(Worker& w);
  void send_case(Worker& w, Flight& flight);
  void arm(Worker& w);
  // The case `w` runs ends so: its frames and stderr added, classified.
  void finish_front(Worker& w, frames::CaseEnd end);
  void replace(Worker& w, bool kill_it);
  void end_worker(Worker& w, bool kill_it);
  void read_results(Worker& w);
  void read_errors(Worker& w);
  void drain_errors(Worker& w);
  void take_frames(Worker& w);
  void worker_gone(Worker& w);
  void check_deadlines();
  int poll_millis() const;
  double ready_seconds() const;

  CaseWorkerStart start_;
  std::string setup_text_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::deque<std::unique_ptr<Flight>> flights_; // oldest first
  std::int64_t workers_started_ = 0;
  std::size_t waiting_bytes_ = 0; // held by done flights not taken yet
};

// --- The worker's side

// What a worker does with its cases, made from the setup.
struct CaseWorkerJob {
  // Case `index` drawn, run and judged: the payload (a serialised verdict). It may call
  // report_progress; an exception it throws is the case's `threw` outcome.
  std::function<std::string(std::int64_t index)> run;
  // Asked after each case: true when this process cannot run another (its CUDA context is
  // lost); the worker then ends and the pool starts a fresh one.
  std::function<bool()> must_retire;
};

// Thrown by a job (or while making one) when the worker cannot go on and no case is to blame:
// the campaign ends with `message`, exit 3. On purpose not a std::exception, which a job's
// case would count as its own failure.
struct CaseWorkerFatal {
  std::string message;
};

// The worker's main loop on the descriptors the pool gave it; `parent` is the campaign's pid
// (--parent). Returns the exit code. Exit 2 with one line when run by hand (no fd 3).
int serve_case_worker(pid_t parent,
                      const std::function<CaseWorkerJob(const nlohmann::json& setup)>& make_job);

} // namespace mc::fuzz
