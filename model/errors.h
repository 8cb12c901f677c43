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

// Bad input: a malformed file, an impossible config, an index out of range.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
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

[[noreturn]] inline void assertion_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "mambacheck: internal assertion failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

} // namespace mc::model

// Invariants that hold by construction; a failure is a bug in mambacheck itself.
#define MC_ASSERT(expr)                                                                            \
  ((expr) ? static_cast<void>(0) : ::mc::model::assertion_failed(#expr, __FILE__, __LINE__))
