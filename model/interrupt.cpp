// Stopping between cases on SIGINT and SIGTERM (interrupt.h).
#include "model/interrupt.h"

#include <csignal>
#include <cstring>

#include <unistd.h>

namespace mc::model {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void write_stderr(const char* text) {
  // write(2) only: this runs in a signal handler.
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
}

extern "C" void on_interrupt(int signal) {
  if (g_signal != 0) {
    write_stderr("\nmambacheck: second signal: exiting now, nothing more is written\n");
    _exit(128 + signal);
  }
  g_signal = signal;
  write_stderr(signal == SIGINT
                   ? "\nmambacheck: SIGINT: stopping after the current case or step and writing "
                     "the report (again to exit at once)\n"
                   : "\nmambacheck: SIGTERM: stopping after the current case or step and writing "
                     "the report (again to exit at once)\n");
}

} // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART; // a read or write in progress goes on; loops check at boundaries
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int interrupt_signal() { return g_signal; }

std::string_view signal_name(int signal) {
  switch (signal) {
  case SIGINT: return "SIGINT";
  case SIGTERM: return "SIGTERM";
  default: return "a signal";
  }
}

void ignore_interrupts() {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
}

} // namespace mc::model
