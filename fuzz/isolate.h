// Running one piece of work in a forked child process, so that a kernel that reads or writes
// out of bounds costs one finding instead of the campaign: the child returns a payload (bytes
// it produced, e.g. a serialised case outcome), or the parent learns what went wrong: it died
// of a signal, threw, exited without a payload, or ran past a timeout. A campaign's own cases
// run in case workers instead (fuzz/case_workers.h), which send the same frames
// (fuzz/isolate_frames.h) and so end in the same outcomes; a forked child runs what is not a
// case of the campaign: the reruns and shrink candidates of a finding, `mambacheck case`.
//
// - The payload comes back through a pipe that the parent drains while the child writes, so a
//   payload of many MiB never blocks the child.
// - In the child a SIGSEGV/SIGBUS handler reports the faulting address and where it lies
//   against the buffers the child registered (model/address_ranges.h: the host backend
//   registers its arenas, block tables and request arrays); then it lets the signal kill the
//   child as it would have. The line then reads "killed by SIGSEGV (invalid memory reference)
//   at address 0x7f3a1c001010 (12 bytes past the end of block table of group 0)".
// - The child's stderr is captured. Under AddressSanitizer a bad access the sanitizer sees
//   (a heap overflow) makes it print a report and exit 1: the outcome is `exited`, its message
//   quotes the report's ERROR line. The handler is installed in the child after the
//   sanitizer's own, so a SIGSEGV the sanitizer does not see first is reported here, with its
//   address.
// - The child ends with _exit: it runs no atexit handler or destructor of the parent's state
//   (no duplicated stdio buffers, no sanitizer leak check of memory it inherited).
//
// The work runs in a copy of the calling process that has only the calling thread: it must
// not need locks or threads of the parent (a thread pool, a CUDA context: run CUDA work in a
// process of its own, e.g. a case worker). The parent thread blocks until the child ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mc::fuzz {

inline constexpr std::int64_t kIsolatedPayloadBytesMaxDefault = std::int64_t{1} << 30;
inline constexpr std::size_t kIsolatedStderrBytesMax = 64 << 10; // kept of the child's stderr

struct IsolateOptions {
  double timeout_seconds = 0.0; // the child is killed after this long; 0: no limit
  std::int64_t payload_bytes_max = kIsolatedPayloadBytesMaxDefault; // more: killed
};

// How the child ended.
enum class IsolatedEnd : std::uint8_t {
  returned,  // the work returned: `payload` is what it returned
  signaled,  // a signal killed it: `signal`, and `fault_address` for SIGSEGV/SIGBUS
  threw,     // the work threw: `message` holds what()
  exited,    // it exited (std::exit, a sanitizer's report) before the work returned
  timed_out, // it ran past the timeout (or wrote past payload_bytes_max) and was killed
};

struct IsolatedOutcome {
  IsolatedEnd end = IsolatedEnd::returned;
  std::string payload;
  // One line saying what went wrong (empty when the work returned): "killed by SIGABRT
  // (aborted)", "threw: boom", "exited with code 7 without a result", "exceeded 0.5 s; killed".
  std::string message;
  int signal = 0;                             // signaled: the signal number
  int exit_code = 0;                          // exited: its status
  std::optional<std::uint64_t> fault_address; // what the crash handler reported
  std::string stderr_text;   // the first kIsolatedStderrBytesMax bytes the child wrote to stderr
  std::int64_t progress = 0; // the last report_progress of the work (0: none)

  bool returned() const { return end == IsolatedEnd::returned; }
};

// The work done in the child: its return value is the payload.
using IsolatedWork = std::function<std::string()>;

// Forks, runs `work` in the child, and waits for it (at most options.timeout_seconds).
// Throws std::system_error when no pipe or child can be made.
IsolatedOutcome run_isolated(const IsolatedWork& work, const IsolateOptions& options = {});

// In a forked child or a case worker: how far the work got (the engine level: the steps it
// started), so that a crash can name where it happened; the last value comes back as
// IsolatedOutcome::progress whatever the end. Does nothing in a process that runs its own work.
void report_progress(std::int64_t progress);

// run_isolated's payload, or nullopt with its one-line message in `failure`: the shape in which
// a report.html is drawn in a child (show::Isolate), so that show/ needs nothing of fuzz/.
std::optional<std::string> run_isolated_payload(const IsolatedWork& work, std::string& failure);

} // namespace mc::fuzz
