// `mambacheck show DIR|TRACE [--out FILE]`: a counterexample as a picture, one self-contained
// HTML file (show/). DIR is a kernel case directory (case.json: the launch's block tables,
// decisions and differing bytes) or an engine counterexample directory (trace.jsonl: the
// timeline of the trace); TRACE is any trace. What a campaign's report.json says of the run
// (backend, mutant, failure, signature, rate, reproduce command) goes into the picture, and
// the backend under test is run again for the actual side; --backend and --mutant override.
// Exit 0 once the picture is written (whether or not the case fails), 2 bad input, 3 a
// backend that cannot run here.
#include "backends/backend.h"
#include "backends/mutant_backend.h"
#include "cli/commands.h"
#include "cli/external_option.h"
#include "cli/output_paths.h"
#include "fuzz/isolate.h"
#include "gpu/cuda_backend.h"
#include "gpu/engine/runner_mutant.h"
#include "gpu/mutant.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "scenarios/trace.h"
#include "show/pictures.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace mc::cli {
namespace {

namespace fs = std::filesystem;

struct ShowOptions {
  std::string path;
  std::string out;
  std::string backend; // empty: the report's, else none (kernel) / host (engine)
  std::string mutant;  // empty: the report's or the trace's
};

// report.json next to the counterexample, or an empty object.
nlohmann::json read_report(const fs::path& dir) {
  std::ifstream in(dir / "report.json");
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    return j.is_object() ? j : nlohmann::json::object();
  } catch (const nlohmann::json::exception&) {
    model::fail_input("{}: not JSON", (dir / "report.json").string());
  }
}

std::string text_field(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string rate_of(const nlohmann::json& j) {
  if (!j.contains("runs") || !j["runs"].is_number_integer()) return text_field(j, "rate");
  return fmt::format("failed {} of {} runs ({})", j.value("failed_runs", 0), j["runs"].get<int>(),
                     text_field(j, "classification"));
}

void show_kernel(const ShowOptions& o, const fs::path& dir, const std::string& out) {
  const nlohmann::json report = read_report(dir);
  std::string backend_name = o.backend.empty() ? text_field(report, "backend") : o.backend;
  const std::string mutant = o.mutant.empty() ? text_field(report, "mutant") : o.mutant;
  std::string note;
  if (o.backend.empty() && backend_name == "cuda" && !gpu::cuda_available()) {
    note = "The counterexample was found on cuda; no CUDA device here, so the host backend runs "
           "the same kernels.";
    backend_name = "host";
  }
  if (backend_name.empty()) backend_name = mutant.empty() ? "oracle" : "host";
  const backends::Backend backend = backends::parse_backend(backend_name);
  if (!mutant.empty() && backend == backends::Backend::oracle)
    model::fail_input("--mutant: runs on --backend host or cuda");
  backends::require_backend(backend);
  fuzz::LaunchRunner runner;
  if (backend != backends::Backend::oracle)
    runner = backends::kernel_runner(
        backend, backends::parse_kernel_mutant(mutant.empty() ? "none" : mutant));
  const model::LaunchCase launch = model::load_case(dir);
  const std::string backend_args =
      fmt::format("--backend {}{}", backend_name, mutant.empty() ? "" : " --mutant " + mutant);
  show::Header header{
      .title = fmt::format("kernel case {}: {}, {} rows", dir.filename().string(),
                           model::to_string(launch.kind), launch.num_reqs),
      .source = dir.string(),
      .failure = text_field(report, "failure"),
      .signature = text_field(report, "signature"),
      .rate = rate_of(report),
      .reproduce = runner ? fmt::format("mambacheck case {} {} --check", dir.string(), backend_args)
                          : fmt::format("mambacheck case {} --print", dir.string()),
      .note = note};
  const std::string actual_name =
      fmt::format("{}{}", backend_name, mutant.empty() ? "" : ", mutant " + mutant);
  write_file_atomically(
      "--out", out,
      show::kernel_picture(
          launch, runner, backend == backends::Backend::host ? fuzz::run_isolated_payload : nullptr,
          actual_name, header));
}

void show_trace(const ShowOptions& o, const fs::path& trace, const nlohmann::json& report,
                const std::string& out) {
  const scenarios::TraceReader reader(trace); // a malformed header is exit 2 here
  const nlohmann::json& source = reader.header().source;
  const auto from_source = [&source](const char* name) {
    return source.is_object() ? text_field(source, name) : std::string();
  };
  show::EnginePictureOptions p;
  const std::string backend = o.backend.empty() ? "host" : o.backend;
  p.replay.executor = engine_executor(backend, " for a trace");
  if (from_source("v1_copy_path") == "batch_copy")
    p.replay.v1_copy_path = oracle::engine::V1CopyPath::batch_copy;
  std::string kernel = from_source("kernel_mutant"), runner = from_source("runner_mutant");
  if (!o.mutant.empty()) {
    kernel = gpu::find_kernel_mutant(o.mutant) ? o.mutant : "none";
    runner = gpu::engine::find_runner_mutant(o.mutant) ? o.mutant : "none";
    if (kernel == "none" && runner == "none")
      model::fail_input("--mutant: no kernel or runner mutant '{}' (see `mambacheck mutants "
                        "--list`)",
                        o.mutant);
  }
  if (const auto k = gpu::find_kernel_mutant(kernel.empty() ? "none" : kernel))
    p.replay.kernel_mutant = *k;
  if (const auto r = gpu::engine::find_runner_mutant(runner.empty() ? "none" : runner))
    p.replay.runner_mutant = *r;
  if (p.replay.executor == model::Backend::host) p.isolate = fuzz::run_isolated_payload;
  std::string mutants;
  if (p.replay.kernel_mutant != gpu::Mutant::none)
    mutants += fmt::format(" --kernel-mutant {}", gpu::to_string(p.replay.kernel_mutant));
  if (p.replay.runner_mutant != gpu::engine::RunnerMutant::none)
    mutants += fmt::format(" --runner-mutant {}", gpu::engine::to_string(p.replay.runner_mutant));
  p.actual_name = fmt::format("{}{}", backend, mutants.empty() ? "" : "," + mutants);
  const std::string replay = fmt::format(
      "mambacheck replay {} --backend {}{}{}", trace.string(), backend,
      p.replay.v1_copy_path == oracle::engine::V1CopyPath::batch_copy ? " --v1-copy batch_copy"
                                                                      : "",
      mutants);
  const nlohmann::json difference =
      report.contains("first_difference") ? report["first_difference"] : nlohmann::json::object();
  p.header = {.title = fmt::format("engine run {}", trace.filename().string()),
              .source = trace.string(),
              .failure = difference.is_object() ? text_field(difference, "text") : "",
              .signature = text_field(report, "signature"),
              .rate = text_field(report, "rate"),
              .reproduce = text_field(report, "reproduce").empty()
                               ? replay
                               : text_field(report, "reproduce") + "\n(the trace: " + replay + ")"};
  write_file_atomically("--out", out, show::engine_picture(trace, p));
}

int run_show(const ShowOptions& o) {
  const fs::path path(o.path);
  std::error_code ec;
  const bool dir = fs::is_directory(path, ec);
  if (!dir && !fs::is_regular_file(path, ec))
    model::fail_input("{}: no such case directory, counterexample directory or trace", o.path);
  const std::string out = !o.out.empty() ? o.out : dir ? (path / "report.html").string()
                                                       : std::string("report.html");
  check_output_file("--out", out);
  if (dir && fs::exists(path / "case.json")) {
    show_kernel(o, path, out);
  } else if (dir && fs::exists(path / "trace.jsonl")) {
    show_trace(o, path / "trace.jsonl", read_report(path), out);
  } else if (dir) {
    model::fail_input("{}: neither a case directory (case.json) nor an engine counterexample "
                      "(trace.jsonl)",
                      o.path);
  } else {
    show_trace(o, path, nlohmann::json::object(), out);
  }
  std::error_code size_error;
  const auto bytes = fs::file_size(out, size_error);
  fmt::print("picture: {} ({} KiB)\n", out, size_error ? 0 : (bytes + 1023) / 1024);
  return kExitOk;
}

void add_show_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* cmd = app.add_subcommand(
      "show", "Draw a counterexample (case directory, engine counterexample or trace) as HTML");
  cmd->add_option("path", o->path,
                  "A case directory (case.json), an engine counterexample directory "
                  "(trace.jsonl) or a trace")
      ->required();
  cmd->add_option("--out", o->out,
                  "The HTML file (default: DIR/report.html, or report.html for a trace)");
  cmd->add_option("--backend", o->backend,
                  "Run the backend under test again for the actual side: oracle (none), host or "
                  "cuda (default: the report's; a trace: host)");
  cmd->add_option("--mutant", o->mutant,
                  "Run this kernel or runner mutant (default: the report's or the trace's)");
  cmd->callback([o, &action] { action = [o] { return run_show(*o); }; });
}

} // namespace

MC_REGISTER_COMMAND(add_show_command);

} // namespace mc::cli
