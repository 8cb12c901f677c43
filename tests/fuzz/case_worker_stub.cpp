// A case worker for the tests of fuzz/case_workers.h: it serves cases the way `mambacheck
// case-worker` does, but what case i does is setup["plan"][i % size]:
//   "ok:MS"     sleep MS milliseconds, return "case I pid P"
//   "gate"      create DIR/running-I, wait until DIR/open exists, return "case I pid P" (DIR:
//               setup["gate_dir"]): the test decides when the case ends, and sees it started.
//               A gate never opened ends the wait after kGateSecondsMax, returning "gate never
//               opened: case I pid P", so a test waiting on a broken pool fails, not hangs
//   "env"       return "case I env V" (V: $MC_STUB_VAR)
//   "segv"      write one byte past the end of a registered buffer ("stub buffer") that ends
//               where an inaccessible page starts
//   "abort"     abort; "stderr-abort": write "stub: about to abort" to stderr first
//   "throw"     throw std::runtime_error("boom")
//   "steps:N"   report progress 1..N, then abort
//   "retire"    return "case I pid P", then ask to be replaced
//   "fatal"     throw CaseWorkerFatal{"the stub cannot go on"}
// setup["fail_setup"] true: making the job throws CaseWorkerFatal{"the stub has no setup"}.
#include "fuzz/case_workers.h"
#include "model/address_ranges.h"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

using mc::fuzz::CaseWorkerFatal;
using mc::fuzz::CaseWorkerJob;

constexpr double kGateSecondsMax = 60.0;

[[noreturn]] void write_past_a_buffer() {
  const long page = sysconf(_SC_PAGESIZE);
  auto* base = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  mprotect(base + page, page, PROT_NONE);
  char* buffer = base + page - 64;
  mc::model::AddressRangeScope scope;
  scope.add(buffer, 64, "stub buffer");
  volatile char* past = buffer + 64;
  *past = 1;
  std::abort(); // not reached
}

// "gate": true when the gate opened, false when it stayed shut for kGateSecondsMax.
bool pass_gate(const std::filesystem::path& dir, std::int64_t index) {
  std::ofstream(dir / fmt::format("running-{}", index)).close();
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(kGateSecondsMax);
  while (!std::filesystem::exists(dir / "open")) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::string run(const nlohmann::json& setup, std::int64_t index, bool& retire) {
  const nlohmann::json& plan = setup.at("plan");
  const std::string step = plan.at(static_cast<std::size_t>(index) % plan.size());
  const std::string pid = std::to_string(getpid());
  if (step.starts_with("ok:")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(step.substr(3))));
    return fmt::format("case {} pid {}", index, pid);
  }
  if (step == "gate") {
    const bool opened = pass_gate(setup.at("gate_dir").get<std::string>(), index);
    if (!opened) return fmt::format("gate never opened: case {} pid {}", index, pid);
    return fmt::format("case {} pid {}", index, pid);
  }
  if (step == "env") {
    const char* value = std::getenv("MC_STUB_VAR");
    return fmt::format("case {} env {}", index, value != nullptr ? value : "-");
  }
  if (step == "segv") write_past_a_buffer();
  if (step == "stderr-abort") {
    std::fputs("stub: about to abort\n", stderr);
    std::fflush(stderr);
    std::abort();
  }
  if (step == "abort") std::abort();
  if (step == "throw") throw std::runtime_error("boom");
  if (step.starts_with("steps:")) {
    const int n = std::stoi(step.substr(6));
    for (int i = 1; i <= n; ++i)
      mc::fuzz::report_progress(i);
    std::abort();
  }
  if (step == "retire") {
    retire = true;
    return fmt::format("case {} pid {}", index, pid);
  }
  if (step == "fatal") throw CaseWorkerFatal{"the stub cannot go on"};
  throw std::logic_error("unknown step " + step);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4 || std::strcmp(argv[1], "case-worker") != 0 ||
      std::strcmp(argv[2], "--parent") != 0) {
    std::fprintf(stderr, "usage: case_worker_stub case-worker --parent PID\n");
    return 2;
  }
  auto retire = std::make_shared<bool>(false);
  return mc::fuzz::serve_case_worker(
      static_cast<pid_t>(std::atoll(argv[3])), [retire](const nlohmann::json& setup) {
        if (setup.value("fail_setup", false)) throw CaseWorkerFatal{"the stub has no setup"};
        return CaseWorkerJob{
            .run = [setup, retire](std::int64_t index) { return run(setup, index, *retire); },
            .must_retire = [retire] { return *retire; }};
      });
}
