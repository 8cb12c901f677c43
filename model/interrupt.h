// SIGINT and SIGTERM stop a long run between two cases or steps, so that nothing already run
// is lost: the first signal is only recorded, every loop that runs cases or steps checks it at
// its next boundary and stops, and the command then writes its report and JUnit of what was
// done, marked interrupted, and exits 128 + the signal (130, 143). A second signal ends the
// process at once. A scheduler that stops a job at its time limit (Slurm, Kubernetes) sends
// SIGTERM first, then SIGKILL after a grace period.
#pragma once

#include <string_view>

namespace mc::model {

// Installs the handlers (once per process; `mambacheck` does it in main).
void install_interrupt_handlers();

// The signal that asked the run to stop (SIGINT or SIGTERM), or 0.
int interrupt_signal();
inline bool interrupted() { return interrupt_signal() != 0; }

// "SIGINT", "SIGTERM", or "signal N".
std::string_view signal_name(int signal);

// In a forked child that runs one case: the case runs to its end whatever the terminal sends
// its process group; the parent decides whether to stop after it.
void ignore_interrupts();

} // namespace mc::model
