#include "fuzz/isolate_frames.h"

#include "model/process.h"

#include <fmt/format.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mc::fuzz {
namespace frames {
namespace {

constexpr std::size_t kAltStackBytes = 64 << 10;
constexpr std::size_t kQuotedBytesMax = 300; // of a stderr line in a message

static_assert(kHeaderBytes + sizeof(FaultRecord) <= PIPE_BUF);

int g_result_fd = -1; // for the crash handler and report_progress

void frame_header(char* out, char tag, std::uint64_t bytes) noexcept {
  out[0] = tag;
  std::memcpy(out + 1, &bytes, sizeof bytes);
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
  char frame[kHeaderBytes + sizeof(FaultRecord)];
  frame_header(frame, kFault, sizeof record);
  std::memcpy(frame + kHeaderBytes, &record, sizeof record);
  model::write_all(g_result_fd, {frame, sizeof frame});
  raise(signal);
  errno = saved_errno;
}

// The line of the process's stderr that says most: a sanitizer's ERROR line, a runtime error,
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

} // namespace

void set_result_fd(int fd) {
  g_result_fd = fd;
}

std::string frame_bytes(char tag, std::string_view data) {
  std::string out(kHeaderBytes, '\0');
  frame_header(out.data(), tag, data.size());
  return out.append(data);
}

bool send(char tag, std::string_view data) {
  // Two writes, no copy of the payload: the child that sends may hold a large one.
  char header[kHeaderBytes];
  frame_header(header, tag, data.size());
  return model::write_all(g_result_fd, {header, sizeof header}) &&
         model::write_all(g_result_fd, data);
}

std::size_t frames_bytes_max(const IsolateOptions& options) {
  return static_cast<std::size_t>(options.payload_bytes_max) + 2 * kHeaderBytes +
         sizeof(FaultRecord);
}

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

std::optional<Frame> take_frame(std::string& bytes) {
  if (bytes.size() < kHeaderBytes) return std::nullopt;
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data() + 1, sizeof length);
  if (length > bytes.size() - kHeaderBytes) return std::nullopt;
  Frame frame{.tag = bytes[0], .data = bytes.substr(kHeaderBytes, length)};
  bytes.erase(0, kHeaderBytes + length);
  return frame;
}

void CaseFrames::add(Frame frame) {
  switch (frame.tag) {
  case kPayload:
    payload = std::move(frame.data);
    break;
  case kThrew:
    threw = std::move(frame.data);
    break;
  case kFault:
    if (frame.data.size() == sizeof(FaultRecord)) {
      FaultRecord record;
      std::memcpy(&record, frame.data.data(), sizeof record);
      record.location.name[model::kRangeNameBytesMax - 1] = '\0';
      fault = record;
    }
    break;
  case kProgress:
    if (frame.data.size() == sizeof(std::int64_t))
      std::memcpy(&progress, frame.data.data(), sizeof progress);
    break;
  default:
    break;
  }
}

IsolatedOutcome classify(CaseEnd end, const IsolateOptions& options) {
  CaseFrames& frames = end.frames;
  IsolatedOutcome out;
  out.stderr_text = std::move(end.stderr_text);
  out.progress = frames.progress;
  if (frames.fault) out.fault_address = frames.fault->address;
  const int status = end.status;
  if (end.timed_out) {
    out.end = IsolatedEnd::timed_out;
    out.message = fmt::format("exceeded {} s; killed", options.timeout_seconds);
  } else if (end.too_big) {
    out.end = IsolatedEnd::timed_out;
    out.message =
        fmt::format("wrote more than {} bytes of payload; killed", options.payload_bytes_max);
  } else if (end.exited && WIFSIGNALED(status)) {
    out.end = IsolatedEnd::signaled;
    out.signal = WTERMSIG(status);
    out.message = fmt::format("killed by {}", model::signal_description(out.signal));
    if (frames.fault && frames.fault->signal == out.signal) {
      out.message += fmt::format(" at address {:#x} ({})", frames.fault->address,
                                 model::describe(frames.fault->location));
    } else {
      out.message = with_stderr_line(std::move(out.message), out.stderr_text);
    }
  } else if (frames.threw) {
    out.end = IsolatedEnd::threw;
    out.message = fmt::format("threw: {}", *frames.threw);
  } else if (frames.payload && (!end.exited || (WIFEXITED(status) && WEXITSTATUS(status) == 0))) {
    out.payload = std::move(*frames.payload);
  } else {
    out.end = IsolatedEnd::exited;
    out.exit_code = end.exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out.message = with_stderr_line(
        fmt::format("exited with code {} without a result", out.exit_code), out.stderr_text);
  }
  return out;
}

} // namespace frames

void report_progress(std::int64_t progress) {
  if (frames::g_result_fd < 0) return;
  std::string data(sizeof progress, '\0');
  std::memcpy(data.data(), &progress, sizeof progress);
  frames::send(frames::kProgress, data);
}

} // namespace mc::fuzz
