#include "backends/external_backend.h"

#include "model/case_file.h"
#include "model/errors.h"
#include "model/process.h"
#include "oracle/launch.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace mc::backends {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kLineBytesMax = 1 << 20;     // one answer line
constexpr std::int64_t kLogTailBytesMax = 1 << 12; // read from the log for a message
constexpr int kExitWaitMillis = 5000;              // after closing its stdin
constexpr std::string_view kGreetingWord = "mambacheck-worker";
constexpr int kProtocolVersion = 1;

using model::excerpt;

// The size of the worker's log now (0 when there is none).
std::int64_t log_size(const fs::path& log_file) {
  std::error_code ec;
  const auto size = log_file.empty() ? 0 : fs::file_size(log_file, ec);
  return ec ? 0 : static_cast<std::int64_t>(size);
}

// "; its stderr ends: \"LINE\"" with the last non-empty line of the worker's log written from
// byte `written_from` on, for a failure message (empty when there is none).
std::string stderr_ending(const fs::path& log_file, std::int64_t written_from = 0) {
  if (log_file.empty()) return {};
  std::ifstream in(log_file, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::int64_t size = in.tellg();
  const std::int64_t from = std::max<std::int64_t>(written_from, size - kLogTailBytesMax);
  if (from >= size) return {};
  in.seekg(from);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  std::istringstream lines(tail);
  std::string line;
  std::string last;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.empty() ? "" : fmt::format("; its stderr ends: \"{}\"", excerpt(last));
}

// "exited with status 4", "killed by SIGSEGV (invalid memory reference)" (with "was " before
// "killed" when `passive`).
std::string exit_description(const model::ProcessEnd& end, bool passive = true) {
  if (end.signaled())
    return fmt::format("{}killed by {}", passive ? "was " : "",
                       model::signal_description(end.signal()));
  const int code = end.exit_code();
  if (code < 0) return "stopped";
  // `sh -c` that runs a command as its child exits 128 + N when the command died of signal N.
  constexpr int kShellSignalBase = 128;
  if (code > kShellSignalBase && code <= kShellSignalBase + 64)
    return fmt::format("exited with status {} (a shell's report of a command killed by {})", code,
                       model::signal_description(code - kShellSignalBase));
  return fmt::format("exited with status {}", code);
}

std::string trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

// Whether result.json says the kernels recorded their decisions (absent: they did).
bool decisions_recorded(const fs::path& result_dir) {
  std::ifstream in(result_dir / model::kResultDirName / "result.json");
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc.contains("decisions_recorded")) return true;
  const nlohmann::json& flag = doc["decisions_recorded"];
  return !flag.is_boolean() || flag.get<bool>();
}

} // namespace


ExternalWorker::ExternalWorker(ExternalOptions options) : options_(std::move(options)) {
  MC_ASSERT(!options_.command.empty());
  MC_ASSERT(options_.timeout_seconds > 0);
  // A worker that dies while we write to it must be an error we report, not our death.
  ::signal(SIGPIPE, SIG_IGN);
  start();
}

void ExternalWorker::start() {
  MC_ASSERT(!child_.running());
  buffer_.clear();
  model::Fd log;
  if (!options_.log_file.empty()) {
    log =
        model::Fd(open(options_.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (log.get() < 0)
      throw ExternalWorkerFailure{fmt::format("--external: cannot open the worker log {}: {}",
                                              options_.log_file.string(), std::strerror(errno))};
  }
  std::vector<model::ChildFd> fds = {{.at = {STDIN_FILENO}, .child_writes = false},
                                     {.at = {STDOUT_FILENO}}};
  if (log.get() >= 0) fds.push_back({.at = {STDERR_FILENO}, .ours = log.get()});
  try {
    child_ = model::Child::spawn({.program = "/bin/sh",
                                  .argv = {"sh", "-c", options_.command},
                                  .fds = fds,
                                  .own_group = true,            // a timeout kills all of it
                                  .default_signals = {SIGPIPE}, // its default back
                                  .what = "--external"});
  } catch (const model::SpawnFailure& e) {
    fail(fmt::format("cannot be started: {}", e.code().message()));
  } catch (const std::system_error& e) {
    throw ExternalWorkerFailure{
        fmt::format("--external: cannot create pipes: {}", e.code().message())};
  }
  parse_greeting(read_greeting());
}

void ExternalWorker::restart() {
  MC_ASSERT(crashed_ && !child_.running());
  if (restarts_ >= kExternalRestartsMax)
    throw ExternalWorkerFailure{fmt::format("--external worker '{}' died on {} cases; not started "
                                            "again",
                                            excerpt(options_.command), restarts_)};
  ++restarts_;
  crashed_ = false;
  const std::vector<model::LaunchKind> kinds_before = kinds_;
  kinds_.clear();
  start();
  if (kinds_ != kinds_before)
    fail(fmt::format("greeted with other kinds when started again: \"{}\"", excerpt(greeting_)));
}

ExternalWorker::~ExternalWorker() {
  stop();
}

void ExternalWorker::stop() {
  child_.close(kToWorker);
  child_.reap(kExitWaitMillis);
  child_ = model::Child();
}

void ExternalWorker::fail(std::string_view what) {
  std::string message = fmt::format("--external worker '{}' {}", excerpt(options_.command), what);
  if (child_.running()) {
    if (const std::optional<model::ProcessEnd> end = child_.wait_for(200))
      message += fmt::format(" (it {})", exit_description(*end));
    else
      child_.reap();
  }
  message += stderr_ending(options_.log_file);
  if (!options_.log_file.empty()) message += fmt::format(" (log: {})", options_.log_file.string());
  stop();
  throw ExternalWorkerFailure{std::move(message)};
}

[[noreturn]] void ExternalWorker::crashed_on_case(model::ReadEnd end) {
  MC_ASSERT(end != model::ReadEnd::line && child_.running());
  std::string message;
  std::optional<model::ProcessEnd> ended;
  if (end == model::ReadEnd::closed) ended = child_.wait_for(kExitWaitMillis);
  if (!ended) { // still running: past the timeout, or it closed its output and lingers
    child_.reap();
    message =
        end == model::ReadEnd::timed_out
            ? fmt::format("the worker exceeded {} s on this case; killed", options_.timeout_seconds)
            : "the worker closed its output on this case; killed";
  } else {
    message = fmt::format("the worker died on this case: {}", exit_description(*ended, false));
  }
  child_.kill(); // what it started and left behind (its group outlives it)
  // Only what it wrote on this case: the log holds the words of earlier crashes too.
  message += stderr_ending(options_.log_file, log_bytes_at_case_);
  stop();
  crashed_ = true;
  throw ExternalWorkerCrash(message, end == model::ReadEnd::timed_out);
}

std::string ExternalWorker::read_greeting() {
  std::string line;
  const model::ReadEnd end = read_line(line);
  if (end == model::ReadEnd::timed_out)
    fail(fmt::format("gave no answer within {} s while we waited for its greeting; killed",
                     options_.timeout_seconds));
  if (end == model::ReadEnd::closed)
    fail(
        fmt::format("closed its output while we waited for its greeting{}",
                    buffer_.empty() ? "" : fmt::format(" (last words: \"{}\")", excerpt(buffer_))));
  return line;
}

model::ReadEnd ExternalWorker::read_line(std::string& line) {
  const model::ReadEnd end =
      model::read_line(child_.fd(kFromWorker), buffer_, line,
                       model::Deadline::after(options_.timeout_seconds), kLineBytesMax);
  if (end == model::ReadEnd::too_long)
    fail(fmt::format("wrote a line of more than {} bytes", kLineBytesMax));
  if (end == model::ReadEnd::failed) fail(fmt::format("cannot be read: {}", std::strerror(errno)));
  return end;
}

void ExternalWorker::parse_greeting(const std::string& line) {
  greeting_ = line;
  std::istringstream words(line);
  std::string word;
  std::string version;
  words >> word >> version;
  if (word != kGreetingWord || version != std::to_string(kProtocolVersion))
    fail(fmt::format("greeted with \"{}\"; expected \"{} {} kinds=...\"", excerpt(line),
                     kGreetingWord, kProtocolVersion));
  serves_engine_ = false;
  serves_bench_ = false;
  forward_kernels_.clear();
  device_.clear();
  has_variants_.reset();
  while (words >> word) {
    if (word == "engine=1") serves_engine_ = true;
    if (word == "bench=1") serves_bench_ = true;
    if (word.starts_with("device=")) device_ = word.substr(7);
    if (word == "variants=0" || word == "variants=1") has_variants_ = word == "variants=1";
    if (word.starts_with("forward=")) {
      std::istringstream names(word.substr(8));
      std::string name;
      while (std::getline(names, name, ','))
        if (name == "ssm" || name == "conv" || name == "scan")
          forward_kernels_.push_back(name);
        else
          fail(fmt::format("greeted with an unknown forward kernel '{}' (expected ssm, conv, "
                           "scan)",
                           excerpt(name)));
    }
    if (!word.starts_with("kinds=")) continue;
    std::istringstream names(word.substr(6));
    std::string name;
    while (std::getline(names, name, ',')) {
      try {
        kinds_.push_back(model::parse_launch_kind(name));
      } catch (const model::InputError&) {
        fail(fmt::format("greeted with an unknown launch kind '{}'", excerpt(name)));
      }
    }
  }
  if (kinds_.empty()) fail(fmt::format("greeted with no kinds=: \"{}\"", excerpt(line)));
}

model::LaunchResult ExternalWorker::run(const model::LaunchCase& launch_case) {
  if (crashed_) restart();
  if (!child_.running()) throw ExternalWorkerFailure{"--external worker: no longer running"};
  const fs::path case_dir = fs::absolute(options_.work_dir / "case");
  const fs::path result_dir = fs::absolute(options_.work_dir / "result");
  std::error_code ec;
  fs::remove_all(case_dir, ec);
  fs::remove_all(result_dir, ec);
  model::save_case(launch_case, case_dir);
  ++cases_run_;
  const std::string answer =
      request(case_dir.string() + "\t" + result_dir.string(), case_dir.string());
  const fs::path answered = trimmed(answer);
  if (answered.empty() || !model::has_result(answered))
    fail(fmt::format("answered \"{}\", which is neither a result directory (DIR/{}/result.json) "
                     "nor error:/fatal:",
                     excerpt(answer), model::kResultDirName));
  model::LaunchResult result;
  try {
    result = model::load_result(answered);
  } catch (const model::InputError& e) {
    fail(fmt::format("wrote a result that does not load: {}", e.what()));
  }
  if (result.status == model::LaunchStatus::ok && !decisions_recorded(answered)) {
    try {
      result.decisions = oracle::run_launch(launch_case).decisions;
    } catch (const model::InputError&) {
      // The oracle rejects the case: the campaign reports that itself.
    }
  }
  return result;
}

std::string ExternalWorker::request(const std::string& line, std::string_view what) {
  if (crashed_) restart();
  if (!child_.running()) throw ExternalWorkerFailure{"--external worker: no longer running"};
  log_bytes_at_case_ = log_size(options_.log_file);
  std::string answer;
  // A write fails when it stopped reading: it died, or is dying.
  const model::ReadEnd end = model::write_all(child_.fd(kToWorker), line + "\n")
                                 ? read_line(answer)
                                 : model::ReadEnd::closed;
  if (end != model::ReadEnd::line) crashed_on_case(end);
  if (answer.starts_with("error:")) throw ExternalKernelError(trimmed(answer.substr(6)));
  if (answer.starts_with("fatal:"))
    fail(fmt::format("gave up on {}: {}", what, excerpt(trimmed(answer.substr(6)))));
  return answer;
}

std::string point_campaign_at(std::vector<model::LaunchKind>& drawn, fuzz::LaunchRunner& backend,
                              ExternalWorker& worker) {
  std::vector<model::LaunchKind> kinds;
  for (const model::LaunchKind kind : model::kAllLaunchKinds) {
    const bool wanted = drawn.empty() || std::ranges::find(drawn, kind) != drawn.end();
    if (wanted && std::ranges::find(worker.kinds(), kind) != worker.kinds().end())
      kinds.push_back(kind);
  }
  if (kinds.empty())
    throw ExternalWorkerFailure{fmt::format("--external worker covers none of the launch kinds "
                                            "asked for (it greeted \"{}\")",
                                            excerpt(worker.greeting()))};
  drawn = kinds;
  ExternalWorker* w = &worker;
  backend = [w](const model::LaunchCase& launch_case) { return w->run(launch_case); };
  return fmt::format("{}", fmt::join(fuzz::kind_names(kinds), ","));
}

std::unique_ptr<ExternalWorker> start_worker_in(const std::string& command,
                                                const fs::path& work_dir, double timeout_seconds) {
  fs::create_directories(work_dir);
  return std::make_unique<ExternalWorker>(ExternalOptions{.command = command,
                                                          .work_dir = work_dir,
                                                          .log_file = work_dir / "worker.log",
                                                          .timeout_seconds = timeout_seconds});
}

std::unique_ptr<ExternalWorker> attach_external_worker(std::vector<model::LaunchKind>& drawn,
                                                       fuzz::LaunchRunner& backend,
                                                       ExternalOptions options) {
  std::error_code ec;
  fs::create_directories(options.work_dir, ec);
  if (ec) model::fail_input("--out: cannot create {}: {}", options.work_dir.string(), ec.message());
  auto worker = std::make_unique<ExternalWorker>(std::move(options));
  const std::string names = point_campaign_at(drawn, backend, *worker);
  std::cout << fmt::format("external worker: {} (kinds {}; stderr in {})\n",
                           excerpt(worker->greeting()), names, worker->options().log_file.string());
  return worker;
}

model::LaunchResult run_external_once(const std::string& command, double timeout_seconds,
                                      const model::LaunchCase& launch_case) {
  const fs::path work = fs::temp_directory_path() / fmt::format("mambacheck-external-{}", getpid());
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec) model::fail_input("cannot create {}: {}", work.string(), ec.message());
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{work};
  ExternalWorker worker(
      {.command = command, .work_dir = work, .log_file = {}, .timeout_seconds = timeout_seconds});
  return worker.run(launch_case);
}

} // namespace mc::backends
