// `mambacheck worker --backend host|cuda [--mutant NAME]`: this program as an external worker
// (backends/external_backend.h), so that `mambacheck fuzz --external 'mambacheck worker
// --backend cuda'` runs the cuda kernels in a process the campaign can replace. It greets
// with `mambacheck-worker 1 kinds=... backend=B mutant=M`, then for each line
// `CASE_DIR<TAB>RESULT_DIR` (or `CASE_DIR` alone: CASE_DIR.result) runs the case and answers
// the result directory, `error: MESSAGE` or `fatal: MESSAGE`.
// - host: each case runs in a forked child (fuzz/isolate.h), so kernels that fault are an
//   `error:` answer naming the address and the buffer it missed; the worker carries on.
// - cuda: in this process. A CUDA error that leaves the context unusable (an illegal address)
//   makes the worker exit without answering: the campaign records a finding for the case and
//   starts a fresh worker. A CUDA error that does not (memory ran out) is `fatal:`.
// File descriptor 1 is kept for the protocol and pointed at stderr, so that nothing printed
// by a library garbles it.
#include "backends/backend.h"
#include "backends/mutant_backend.h"
#include "cli/commands.h"
#include "fuzz/isolate.h"
#include "gpu/cuda_backend.h"
#include "gpu/host_backend.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/process.h"

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

namespace mc::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kProtocolVersion = 1;
constexpr std::size_t kLineBytesMax = 1 << 16; // of an input line: two paths
constexpr int kExitContextLost = 4;            // the CUDA context is unusable: replace us

struct WorkerOptions {
  std::string backend;
  std::string mutant; // a kernel mutant; empty: the clean kernels
};

struct Worker {
  backends::Backend backend = backends::Backend::host;
  gpu::Mutant mutant = gpu::Mutant::none;
  int protocol_fd = -1;
};

void answer(const Worker& w, const std::string& text) {
  if (!model::write_all(w.protocol_fd, text + "\n"))
    throw model::EnvironmentError("worker: the campaign stopped reading its answers");
}

std::string one_line(std::string text) {
  for (char& ch : text)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return text;
}

// The result next to a copy of the case's case.json (what load_result reads it against).
void save_answer(const model::LaunchResult& result, const fs::path& case_dir,
                 const fs::path& result_dir) {
  if (fs::weakly_canonical(case_dir) != fs::weakly_canonical(result_dir)) {
    fs::create_directories(result_dir);
    fs::copy_file(case_dir / "case.json", result_dir / "case.json",
                  fs::copy_options::overwrite_existing);
  }
  model::save_result(result, result_dir);
}

// One case on the host kernels, in a child: the answer line, whatever the kernels do.
std::string run_host(const Worker& w, const model::LaunchCase& launch, const fs::path& case_dir,
                     const fs::path& result_dir) {
  const fuzz::IsolatedOutcome out = fuzz::run_isolated([&] {
    try {
      save_answer(gpu::run_launch_host(launch, w.mutant), case_dir, result_dir);
      return result_dir.string();
    } catch (const model::InputError& e) {
      return fmt::format("error: the kernels rejected the case: {}", one_line(e.what()));
    }
  });
  if (out.returned()) return out.payload;
  return fmt::format("error: {}", one_line(out.message));
}

// One case on the cuda kernels in this process; nothing when the context is lost.
std::optional<std::string> run_cuda(const Worker& w, const model::LaunchCase& launch,
                                    const fs::path& case_dir, const fs::path& result_dir) {
  try {
    save_answer(gpu::run_launch_cuda(launch, w.mutant), case_dir, result_dir);
    return result_dir.string();
  } catch (const model::InputError& e) {
    return fmt::format("error: the kernels rejected the case: {}", one_line(e.what()));
  } catch (const model::EnvironmentError& e) {
    if (gpu::cuda_context_usable()) return fmt::format("fatal: {}", one_line(e.what()));
    std::cerr << fmt::format("mambacheck worker: {}: {}; the CUDA context is unusable after "
                             "it: exiting without an answer\n",
                             case_dir.string(), one_line(e.what()));
    return std::nullopt;
  }
}

// The answer to one input line; nothing when the worker must end without one.
std::optional<std::string> run_line(const Worker& w, const std::string& line) {
  const std::size_t tab = line.find('\t');
  const fs::path case_dir = line.substr(0, tab);
  const fs::path result_dir = tab == std::string::npos ? fs::path(case_dir.string() + ".result")
                                                       : fs::path(line.substr(tab + 1));
  model::LaunchCase launch;
  try {
    launch = model::load_case(case_dir);
  } catch (const model::InputError& e) {
    // mambacheck wrote the case: one that does not load is a broken campaign, not a finding.
    return fmt::format("fatal: cannot read the case: {}", one_line(e.what()));
  }
  if (w.backend == backends::Backend::host) return run_host(w, launch, case_dir, result_dir);
  return run_cuda(w, launch, case_dir, result_dir);
}

std::string greeting(const Worker& w) {
  std::string kinds;
  for (const model::LaunchKind kind : model::kAllLaunchKinds)
    kinds += fmt::format("{}{}", kinds.empty() ? "" : ",", model::to_string(kind));
  return fmt::format("mambacheck-worker {} kinds={} backend={} mutant={}", kProtocolVersion, kinds,
                     backends::to_string(w.backend), gpu::to_string(w.mutant));
}

int run_worker(const WorkerOptions& o) {
  Worker w;
  w.backend = backends::parse_backend(o.backend);
  if (w.backend == backends::Backend::oracle)
    model::fail_input("--backend: a worker runs kernels: host or cuda, not the oracle");
  if (!o.mutant.empty()) w.mutant = backends::parse_kernel_mutant(o.mutant);
  backends::require_backend(w.backend);
  std::cout.flush();
  w.protocol_fd = dup(STDOUT_FILENO);
  if (w.protocol_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
    throw model::EnvironmentError("worker: cannot set its output aside");
  answer(w, greeting(w));
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line == "quit") break;
    if (line.size() > kLineBytesMax) {
      answer(w, fmt::format("fatal: an input line of more than {} bytes", kLineBytesMax));
      return 1;
    }
    const std::optional<std::string> reply = run_line(w, line);
    if (!reply) return kExitContextLost;
    answer(w, *reply);
    if (reply->starts_with("fatal:")) return 1;
  }
  return kExitOk;
}

void add_worker_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<WorkerOptions>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Run launch cases from stdin as an external worker (for fuzz --external)");
  cmd->add_option("--backend", o->backend, "host or cuda")->required();
  cmd->add_option("--mutant", o->mutant, "Run the kernels of this kernel mutant");
  cmd->callback([o, &action] { action = [o] { return run_worker(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_worker_command);

} // namespace mc::cli
