// The external backend: kernels under test that run in another process, typically the Python
// adapter's worker (adapters/python/: Triton or PyTorch kernels on the GPU), driven through
// case directories (model/CASE_FORMAT.md), so `mambacheck fuzz --external 'COMMAND'`
// generates, compares, shrinks and reports exactly as it does for its own backends.
//
// The worker command is started once (`/bin/sh -c COMMAND`, in its own process group, its
// stderr appended to a log file). The protocol (adapters/python/README.md, "Worker protocol"):
// - the worker greets with one line `mambacheck-worker 1 kinds=KIND,... [key=value ...]`;
// - per case we write `CASE_DIR<TAB>RESULT_DIR\n` (absolute paths) and it answers one line:
//   the result directory (case.json + expected/, what `mambacheck case --out` writes),
//   `error: MESSAGE` (the kernel failed on this case: a finding), or `fatal: MESSAGE`.
// A worker that dies or exceeds the timeout while it runs a case was brought down by that
// case, as kernels that write out of bounds or hang do: a finding for the case
// (ExternalWorkerCrash). It is then started again, same command, greeting read again, before
// the next case. A worker that cannot start, never greets, answers anything else, says fatal:
// or writes a result that does not load cannot be judged: that is ExternalWorkerFailure
// (exit 3), never a mismatch.
//
// A kernel reports effects, not decisions: when the worker's result.json says
// `"decisions_recorded": false`, the oracle's decisions stand in for the kernel's and only
// the status, the per-request arrays and every arena byte are compared.
#pragma once

#include "fuzz/run_case.h"
#include "model/launch.h"
#include "model/process.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mc::backends {

inline constexpr double kExternalTimeoutSecondsDefault = 300.0;
// Restarts after a crash, per worker: a bound, never reached by a campaign (its shrinking is
// bounded far below), that stops a loop of crashes from running forever.
inline constexpr std::int64_t kExternalRestartsMax = 1 << 16;

struct ExternalOptions {
  std::string command;            // run by /bin/sh -c
  std::filesystem::path work_dir; // case and result directories are written here
  std::filesystem::path log_file; // the worker's stderr (appended); empty: inherited
  double timeout_seconds = kExternalTimeoutSecondsDefault; // the greeting, and each case
};

// The worker cannot be used (it died, timed out, answered garbage or said fatal). On purpose
// not a std::exception: the kernel campaign turns a backend's std::exception into a finding
// and shrinks it, but a dead worker says nothing about the kernels. It propagates through the
// campaign to the subcommand, which reports it in one line with exit 3.
struct ExternalWorkerFailure {
  std::string message;
};

// The worker answered `error: MESSAGE` for one case: the kernels under test failed on it
// (raised, wrote outside their buffers). A finding like a wrong byte.
struct ExternalKernelError : fuzz::KernelError {
  using fuzz::KernelError::KernelError;
};

// The worker died or ran past the timeout on one case ("the worker died on this case: killed
// by SIGSEGV (invalid memory reference)", "the worker exceeded 300 s on this case; killed"),
// and was reaped. A finding for that case; the next case starts the worker again.
struct ExternalWorkerCrash : fuzz::KernelError {
  ExternalWorkerCrash(const std::string& message, bool past_timeout)
      : fuzz::KernelError(message), timed_out(past_timeout) {}
  bool timed_out = false; // it ran past the timeout (else it died)
};

class ExternalWorker {
public:
  // Starts the command and reads its greeting; ExternalWorkerFailure if it does not come.
  explicit ExternalWorker(ExternalOptions options);
  ~ExternalWorker(); // closes its stdin, waits a little, then kills its process group
  ExternalWorker(const ExternalWorker&) = delete;
  ExternalWorker& operator=(const ExternalWorker&) = delete;

  // Runs one case on the worker, first starting it again if it died on the case before.
  // Throws ExternalKernelError for an `error:` answer, ExternalWorkerCrash when the worker
  // dies or times out on this case, and ExternalWorkerFailure when it cannot be used.
  model::LaunchResult run(const model::LaunchCase& launch_case);

  // One line of a protocol (run()'s case line, the engine or bench protocol's:
  // backends/external_engine.h, bench/external_bench.h) and its answer line, first starting the
  // worker again if it died before. Throws as run() does: ExternalKernelError for `error:`,
  // ExternalWorkerCrash, ExternalWorkerFailure for `fatal:` (naming `what` the request was) or no
  // answer.
  std::string request(const std::string& line, std::string_view what = "an engine launch");

  const std::vector<model::LaunchKind>& kinds() const { return kinds_; }
  bool serves_engine() const { return serves_engine_; } // it greeted with engine=1
  bool serves_bench() const { return serves_bench_; }   // it greeted with bench=1
  // The forward's state kernels its module provides (forward=ssm,conv,scan): "ssm"
  // (selective_state_update), "conv" (causal_conv1d_update), "scan" (selective_scan_fn).
  const std::vector<std::string>& forward_kernels() const { return forward_kernels_; }
  // The device its kernels run on (device=NAME, e.g. host or cuda); empty when not greeted.
  const std::string& device() const { return device_; }
  // Whether `COMMAND --variant NAME` starts broken variants of its kernels module (variants=1)
  // or the module has none (variants=0); nullopt when the greeting does not say (a worker
  // other than the adapter's).
  std::optional<bool> has_variants() const { return has_variants_; }
  bool crashed() const { return crashed_; } // died on its last case or request
  const std::string& greeting() const { return greeting_; }
  const ExternalOptions& options() const { return options_; }
  std::int64_t cases_run() const { return cases_run_; }
  std::int64_t restarts() const { return restarts_; } // after crashes

private:
  void start();
  void restart();
  [[noreturn]] void fail(std::string_view what);
  [[noreturn]] void crashed_on_case(model::ReadEnd end);
  model::ReadEnd read_line(std::string& line);
  std::string read_greeting();
  void parse_greeting(const std::string& line);
  void stop();

  ExternalOptions options_;
  static constexpr std::size_t kToWorker = 0;   // its stdin, of child_'s pipes
  static constexpr std::size_t kFromWorker = 1; // its stdout
  model::Child child_;
  std::string buffer_; // bytes read past the last line
  std::string greeting_;
  std::vector<model::LaunchKind> kinds_;
  bool serves_engine_ = false;
  bool serves_bench_ = false;
  std::vector<std::string> forward_kernels_;
  std::string device_;
  std::optional<bool> has_variants_;
  std::int64_t cases_run_ = 0;
  std::int64_t restarts_ = 0;
  bool crashed_ = false;               // it died on the last case: start it again before the next
  std::int64_t log_bytes_at_case_ = 0; // the log's size when the last case was sent
};

// Points a kernel campaign at `worker` (the caller keeps it alive): `backend` runs cases on it,
// and `drawn`, the kinds its generator draws (empty: all), becomes those of them the worker
// covers. Returns those kinds' names, comma-separated. ExternalWorkerFailure when the worker
// covers none of them.
std::string point_campaign_at(std::vector<model::LaunchKind>& drawn, fuzz::LaunchRunner& backend,
                              ExternalWorker& worker);

using model::shell_quote;

// A worker whose case files and log (worker.log) go in `work_dir`, created first
// (std::filesystem::filesystem_error when it cannot be); ExternalWorkerFailure as the
// constructor.
std::unique_ptr<ExternalWorker> start_worker_in(const std::string& command,
                                                const std::filesystem::path& work_dir,
                                                double timeout_seconds);

// Points a kernel campaign at an external worker, started here (point_campaign_at).
// Returns the worker (keep it alive for the campaign). Prints one line about the worker.
std::unique_ptr<ExternalWorker> attach_external_worker(std::vector<model::LaunchKind>& drawn,
                                                       fuzz::LaunchRunner& backend,
                                                       ExternalOptions options);

// One case on a worker started for it (`mambacheck case --external`): its stderr inherited,
// its files in a temporary directory removed afterwards.
model::LaunchResult run_external_once(const std::string& command, double timeout_seconds,
                                      const model::LaunchCase& launch_case);

} // namespace mc::backends
