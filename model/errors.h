// Errors raised at the edge of the program (bad files, options, configs).
//
// Inside the project invariants are assertions (MC_ASSERT); what a user can get
// wrong is an InputError (exit code 2) and what the machine lacks is an
// EnvironmentError (exit code 3), see DESIGN.md "CLI contract".
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mc::model {

// Control characters in `text` written as \xNN, so that a message quoting a user's bytes
// (a key read from a file, an option value) stays one printable line.
inline std::string printable_line(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out.push_back(c);
  }
  return out;
}

// Bad input: a malformed file, an impossible config, an index out of range. The message is
// one line whatever the input held.
struct InputError : std::runtime_error {
  explicit InputError(const std::string& message) : std::runtime_error(printable_line(message)) {}
  explicit InputError(const char* message) : InputError(std::string(message)) {}
};

// The environment lacks what was asked for (e.g. --backend cuda without a GPU).
struct EnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A kernel faulted on the device (an illegal or misaligned address, an illegal instruction)
// and took the process's CUDA context with it: every later CUDA call fails the same way, so
// nothing more can run on the device in this process. Under test that is a finding about the
// kernels; a campaign must go on in a fresh process.
struct DeviceFault : EnvironmentError {
  using EnvironmentError::EnvironmentError;
};

template <typename... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> format, Args&&... args) {
  throw InputError(fmt::format(format, std::forward<Args>(args)...));
}

// A failed MC_ASSERT inside a scope that reports it (AssertionsReported). what(): "EXPR at
// FILE:LINE".
struct AssertionFailure : std::logic_error {
  using std::logic_error::logic_error;
};

namespace detail {
// Scopes of AssertionsReported open on this thread.
inline thread_local int assertions_reported_depth = 0;
} // namespace detail

// While one lives, a failed MC_ASSERT on this thread throws AssertionFailure instead of
// aborting. The oracle engine's step opens one: a broken assumption of the engine model is
// then a finding of that step, with its trace, and the campaign goes on. Everywhere else an
// assertion still aborts, so a programming error outside the model stays loud.
class AssertionsReported {
public:
  AssertionsReported() { ++detail::assertions_reported_depth; }
  ~AssertionsReported() { --detail::assertions_reported_depth; }
  AssertionsReported(const AssertionsReported&) = delete;
  AssertionsReported& operator=(const AssertionsReported&) = delete;
};

[[noreturn]] inline void assertion_failed(const char* expr, const char* file, int line) {
  if (detail::assertions_reported_depth > 0)
    throw AssertionFailure(fmt::format("{} at {}:{}", expr, file, line));
  std::fprintf(stderr, "mambacheck: internal assertion failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

} // namespace mc::model

// Invariants that hold by construction; a failure is a bug in mambacheck itself.
#define MC_ASSERT(expr)                                                                            \
  ((expr) ? static_cast<void>(0) : ::mc::model::assertion_failed(#expr, __FILE__, __LINE__))
