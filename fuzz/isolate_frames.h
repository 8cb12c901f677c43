// What a process that runs cases for the campaign (a forked child, fuzz/isolate.h, or a case
// worker, fuzz/case_workers.h) sends back, and how the campaign reads it: frames of a tag
// byte, a 64-bit length and that many bytes on a pipe. Both sides of both kinds of process use
// this one format, so a crash, a throw or a timeout reads the same whichever ran the case.
//
// The sending side installs a SIGSEGV/SIGBUS handler, on its own stack (a stack overflow is a
// SIGSEGV too), that sends the faulting address (si_addr) and where it lies against the buffers
// registered by the thread (model/address_ranges.h), using only write(2), then lets the signal
// kill the process as it would have.
#pragma once

#include "fuzz/isolate.h"
#include "model/address_ranges.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mc::fuzz::frames {

inline constexpr char kPayload = 'P';  // the work returned these bytes
inline constexpr char kThrew = 'E';    // the work threw: what()
inline constexpr char kFault = 'F';    // a FaultRecord, from the crash handler
inline constexpr char kProgress = 'T'; // report_progress: an int64
inline constexpr char kReady = 'R';    // a case worker read its setup and waits for cases
inline constexpr char kRetire = 'X';   // a case worker ends after the case it answered
inline constexpr char kFatal = 'Z';    // a case worker cannot go on: a message (exit 3)
inline constexpr std::size_t kHeaderBytes = 1 + sizeof(std::uint64_t);

// Sent by the crash handler as one frame, in one write (smaller than PIPE_BUF: atomic).
struct FaultRecord {
  std::int32_t signal = 0;
  std::int32_t code = 0; // si_code
  std::uint64_t address = 0;
  model::RangeLocation location;
};

// --- The side that runs the work

// The pipe the frames go to (the crash handler and report_progress use it too).
void set_result_fd(int fd);
// One frame of `data`, as `send` writes it.
std::string frame_bytes(char tag, std::string_view data);
// Sends one frame; false when the pipe is gone.
bool send(char tag, std::string_view data);
// The SIGSEGV/SIGBUS handler above. Install it after a sanitizer's (ASan's
// allow_user_segv_handler, on by default, lets it replace ASan's).
void install_crash_handler();

// --- The campaign's side

struct Frame {
  char tag = 0;
  std::string data;
};

// The most that the frames of one case may hold: its payload, a fault and the headers.
std::size_t frames_bytes_max(const IsolateOptions& options);
// Takes the first whole frame off the front of `bytes`; nothing while it is incomplete.
std::optional<Frame> take_frame(std::string& bytes);

// What the frames of one case said.
struct CaseFrames {
  std::optional<std::string> payload;
  std::optional<std::string> threw;
  std::optional<FaultRecord> fault;
  std::int64_t progress = 0;
  // Adds a frame of the case (payload, threw, fault or progress); other tags are ignored.
  void add(Frame frame);
};

// How a process that ran one case ended, and what it sent.
struct CaseEnd {
  CaseFrames frames;
  std::string stderr_text;
  int status = 0;      // waitpid's, when it exited; 0 when it is still alive (a worker)
  bool exited = false; // the process ended (status says how)
  bool timed_out = false;
  bool too_big = false; // it wrote more than payload_bytes_max
};

// The outcome those make: returned, threw, signaled (with the faulting address and the buffer
// it lies in or next to), exited or timed out, with the same one-line message wherever the case
// ran ("killed by SIGSEGV (invalid memory reference) at address 0x7f... (12 bytes past the end
// of block table of group 0)", "exceeded 0.5 s; killed").
IsolatedOutcome classify(CaseEnd end, const IsolateOptions& options);

} // namespace mc::fuzz::frames
