// NVIDIA MPS for a campaign's cuda case workers (mps.h), and `mambacheck cuda-probe`, the
// hidden subcommand that checks a CUDA context can be made through it.
#include "cli/mps.h"

#include "cli/commands.h"
#include "gpu/cuda_backend.h"
#include "model/process.h"

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mc::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kControl = "nvidia-cuda-mps-control";
constexpr const char* kPipeVar = "CUDA_MPS_PIPE_DIRECTORY";
constexpr const char* kLogVar = "CUDA_MPS_LOG_DIRECTORY";

// The control program's path on PATH, empty where it is not there.
std::string find_control() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / kControl;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  }
  return {};
}

// Whether a child process of this program makes a CUDA context (under the MPS variables this
// process has set) within kProbeSeconds. An MPS server cannot start on a GPU while another
// user's serves it, and its clients then wait: the probe is killed and the campaign goes on
// without MPS.
constexpr int kProbeSeconds = 30;

bool probe_context(std::string& why_not) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    why_not = "cannot find this program to probe a CUDA context";
    return false;
  }
  model::Child probe;
  try {
    probe = model::Child::spawn({.program = self.string(), .argv = {self.string(), "cuda-probe"}});
  } catch (const std::system_error&) {
    why_not = "cannot start a process to probe a CUDA context";
    return false;
  }
  const std::optional<model::ProcessEnd> end = probe.wait_for(kProbeSeconds * 1000);
  if (!end) {
    probe.reap();
    why_not = fmt::format("a CUDA context through the MPS server did not come up in {} s "
                          "(another user's MPS server on the GPU?)",
                          kProbeSeconds);
    return false;
  }
  if (end->exit_code() != 0) {
    why_not = "a CUDA context through the MPS server failed";
    return false;
  }
  return true;
}

// The control program run with `args` (and `input` on its stdin, where there is any; else it
// inherits ours, as the daemon it starts does); its exit code, -1 where it did not exit or start.
int run_control(const std::string& control, std::vector<std::string> args, std::string_view input) {
  args.insert(args.begin(), control);
  try {
    std::vector<model::ChildFd> fds;
    if (!input.empty()) fds.push_back({.at = {STDIN_FILENO}, .child_writes = false});
    model::Child child = model::Child::spawn({.program = control, .argv = args, .fds = fds});
    model::write_all(child.fd(0), input);
    child.close(0);
    return child.wait().exit_code();
  } catch (const std::system_error&) {
    return -1;
  }
}

// Whether the daemon whose pipe directory is `pipe` runs: its pid file names a live process.
bool daemon_running(const fs::path& pipe) {
  std::ifstream file(pipe / fmt::format("{}.pid", kControl));
  long pid = 0;
  if (!(file >> pid) || pid <= 0) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

MpsSession* live_session = nullptr;

void stop_live_session() {
  if (live_session != nullptr) live_session->stop();
}

} // namespace

bool mps_available() {
  const char* pipe = std::getenv(kPipeVar);
  return (pipe != nullptr && *pipe != '\0') || !find_control().empty();
}

std::unique_ptr<MpsSession> MpsSession::start(std::string& why_not) {
  std::unique_ptr<MpsSession> s(new MpsSession);
  if (const char* pipe = std::getenv(kPipeVar); pipe != nullptr && *pipe != '\0') {
    s->pipe_ = pipe;
    // Without a live daemon there a context comes up without MPS, and the workers would take
    // turns: the daemon's pid file says whether it runs.
    if (!daemon_running(s->pipe_)) {
      why_not = fmt::format("{}={} names no running MPS daemon (no live {}.pid there)", kPipeVar,
                            s->pipe_, kControl);
      return nullptr;
    }
    if (!probe_context(why_not)) return nullptr;
    return s;
  }
  s->control_ = find_control();
  if (s->control_.empty()) {
    why_not = fmt::format("{} is not on PATH", kControl);
    return nullptr;
  }
  std::string templ = (fs::temp_directory_path() / "mc-mps-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) {
    why_not = fmt::format("cannot make a directory for its pipes under {}",
                          fs::temp_directory_path().string());
    return nullptr;
  }
  s->dir_ = templ;
  s->pipe_ = (s->dir_ / "pipe").string();
  std::error_code ec;
  fs::create_directories(s->pipe_, ec);
  fs::create_directories(s->dir_ / "log", ec);
  setenv(kPipeVar, s->pipe_.c_str(), 1);
  setenv(kLogVar, (s->dir_ / "log").c_str(), 1);
  s->own_ = true;
  live_session = s.get();
  [[maybe_unused]] static const bool registered = std::atexit(stop_live_session) == 0;
  const int rc = run_control(s->control_, {"-d"}, "");
  if (rc != 0) {
    why_not = fmt::format("{} -d exited with {}", kControl, rc);
    s->stop();
    return nullptr;
  }
  if (!probe_context(why_not)) {
    s->stop();
    return nullptr;
  }
  return s;
}

MpsSession::~MpsSession() {
  stop();
}

void MpsSession::stop() {
  if (live_session == this) live_session = nullptr;
  if (!own_) return;
  own_ = false;
  // The control program takes commands on its input; `quit` shuts the server and the daemon
  // down before it returns.
  run_control(control_, {}, "quit\n");
  unsetenv(kPipeVar);
  unsetenv(kLogVar);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string MpsSession::line() const {
  if (own_)
    return fmt::format("MPS: started {} for this campaign ({}): its case workers share each GPU "
                       "at once",
                       kControl, dir_.string());
  return fmt::format("MPS: the daemon at {}: the case workers share each GPU at once", pipe_);
}

namespace {

void add_cuda_probe_command(CLI::App& app, Action& action) {
  CLI::App* cmd = app.add_subcommand("cuda-probe", "Make a CUDA context on device 0 and exit");
  cmd->group(""); // run by campaigns only: not listed in --help
  cmd->callback([&action] { action = [] { return gpu::cuda_context_usable() ? 0 : 1; }; });
}

} // namespace

MC_REGISTER_COMMAND(add_cuda_probe_command);

} // namespace mc::cli
