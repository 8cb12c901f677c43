// `mambacheck bench --external` (bench/external_bench.h).
#include "bench/external_bench.h"

#include "backends/external_backend.h"
#include "bench/kernel_bench_cases.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "model/presets.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

namespace mc::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kDefaultPresets = {"mamba2-2.7b", "qwen3-next-80b", "nemotron-h-8b"};
const std::vector<std::int32_t> kDefaultRequests = {64, 256};

// The V2 postprocess in the worker's table convention: gathered by batch row (the seed) or one
// row per request slot (vLLM #55506). The bench's idx_mapping is the identity, so both read
// the same rows and time the same copies.
model::LaunchKind postprocess_kind(const backends::ExternalWorker& worker, std::string_view role) {
  if (!worker.serves_bench())
    throw backends::ExternalWorkerFailure{
        fmt::format("--{} worker does not serve the bench protocol (no bench=1 in its greeting "
                    "\"{}\")",
                    role, worker.greeting())};
  for (const model::LaunchKind kind :
       {model::LaunchKind::postprocess_align, model::LaunchKind::postprocess_align_slot_tables})
    if (std::ranges::find(worker.kinds(), kind) != worker.kinds().end()) return kind;
  throw backends::ExternalWorkerFailure{
      fmt::format("--{} worker covers neither postprocess_align nor "
                  "postprocess_align_slot_tables, the launches the bench times (it greeted "
                  "\"{}\")",
                  role, worker.greeting())};
}

// One case directory per input set, sharing the layout; the arenas are zero (the worker
// allocates them; the bytes copied do not change the time), so their files are holes.
std::vector<std::string> write_sets(const gpu::BenchCase& bench, model::LaunchKind kind,
                                    const fs::path& dir) {
  std::vector<std::string> dirs;
  for (std::size_t s = 0; s < bench.sets.size(); ++s) {
    model::LaunchCase c{.layout = bench.layout,
                        .kind = kind,
                        .num_reqs = bench.num_reqs,
                        .num_slots = bench.num_reqs,
                        .block_tables = bench.sets[s],
                        .requests = bench.requests};
    for (const model::ArenaSpec& arena : bench.layout.arenas)
      c.arenas.emplace_back(arena.size_bytes());
    const fs::path set_dir = dir / fmt::format("set-{}", s);
    model::save_case(c, set_dir);
    dirs.push_back(fs::absolute(set_dir).string());
  }
  return dirs;
}

struct WorkerTimes {
  double median_us = 0;
  double min_us = 0;
  std::string timing;
};

WorkerTimes time_on(backends::ExternalWorker& worker, const std::vector<std::string>& dirs,
                    std::int32_t iters, std::string_view role, std::string_view case_name) {
  std::string answer;
  try {
    answer = worker.request("bench " + json{{"cases", dirs}, {"iters", iters}}.dump(),
                            "a bench request");
  } catch (const fuzz::KernelError& e) { // an `error:` answer, a death or a hang
    throw ExternalBenchKernelFailure{
        fmt::format("the --{} kernels failed on bench case {}: {}", role, case_name, e.what())};
  }
  try {
    const json times = json::parse(answer);
    return {.median_us = times.at("median_us").get<double>(),
            .min_us = times.at("min_us").get<double>(),
            .timing = times.at("timing").get<std::string>()};
  } catch (const json::exception& e) {
    throw backends::ExternalWorkerFailure{
        fmt::format("--{} worker answered a bench request with \"{}\", not its times: {}", role,
                    answer.substr(0, 200), e.what())};
  }
}

struct Workers {
  std::unique_ptr<backends::ExternalWorker> candidate;
  std::unique_ptr<backends::ExternalWorker> baseline; // null: none
  model::LaunchKind kind = model::LaunchKind::postprocess_align;
};

Workers start_workers(const ExternalBenchOptions& o) {
  const auto start = [&](const std::string& command, const char* log) {
    return std::make_unique<backends::ExternalWorker>(
        backends::ExternalOptions{.command = command,
                                  .work_dir = o.work_dir,
                                  .log_file = o.work_dir / log,
                                  .timeout_seconds = o.timeout_seconds});
  };
  Workers w;
  w.candidate = start(o.command, "external-worker.log");
  w.kind = postprocess_kind(*w.candidate, "external");
  if (!o.baseline_command.empty()) {
    w.baseline = start(o.baseline_command, "baseline-worker.log");
    if (postprocess_kind(*w.baseline, "baseline") != w.kind)
      throw backends::ExternalWorkerFailure{fmt::format(
          "--external and --baseline workers take different block-table conventions (\"{}\" "
          "against \"{}\"): their launches would not be the same",
          w.candidate->greeting(), w.baseline->greeting())};
  }
  return w;
}

std::string times_cell(double us) {
  return us > 0 ? fmt::format("{:>10.1f}", us) : fmt::format("{:>10}", "-");
}

} // namespace

ExternalBenchResult run_external_bench(const ExternalBenchOptions& o, std::ostream& out) {
  MC_ASSERT(!o.command.empty());
  MC_ASSERT(o.iters > 0 && o.sets >= 1 && o.sets <= gpu::kBenchSetsMax);
  MC_ASSERT(!o.max_slowdown || !o.baseline_command.empty());
  const std::optional<gpu::BenchGpu> gpu = gpu::bench_gpu();
  const std::int64_t budget =
      gpu ? std::min(gpu->memory_budget_bytes / 3, kExternalBenchGpuArenaBytesMax)
          : kExternalBenchHostArenaBytes;
  const std::int64_t cache_bytes = gpu ? gpu->cache_bytes : 0;
  fs::create_directories(o.work_dir);
  Workers workers = start_workers(o);
  out << fmt::format("bench on external kernels: {} ({}); baseline: {}; this build's kernels: {}; "
                     "iters {}, median per launch\n",
                     o.command, workers.candidate->greeting(),
                     o.baseline_command.empty() ? "none" : o.baseline_command,
                     gpu ? gpu->name : "none (no CUDA device)", o.iters);
  out << fmt::format("{:<16} {:>5} {:>8} {:>6} {:>10}  {:>10} {:>10} {:>7}  {:>10} {:>10} {:>9}\n",
                     "case", "reqs", "crossing", "states", "MB", "candidate", "baseline", "ratio",
                     "own fused", "memcpy", "vs memcpy");
  ExternalBenchResult result{
      .report = {{"command", o.command},
                 {"baseline", o.baseline_command},
                 {"max_slowdown", o.max_slowdown ? json(*o.max_slowdown) : json(nullptr)},
                 {"gpu", gpu ? json(gpu->name) : json(nullptr)},
                 {"iters", o.iters},
                 {"launch_kind", model::to_string(workers.kind)},
                 {"cases", json::array()},
                 {"regressions", json::array()}}};
  for (const std::string& name : o.presets.empty() ? kDefaultPresets : o.presets) {
    const model::Preset& preset = model::find_preset(name);
    for (const std::int32_t reqs : o.requests.empty() ? kDefaultRequests : o.requests) {
      const gpu::BenchCase bench = gpu::make_bench_case(name, preset.config, preset.spec, reqs,
                                                        reqs, budget, o.sets, cache_bytes);
      const fs::path dir = o.work_dir / fmt::format("{}-{}", name, reqs);
      const std::vector<std::string> dirs = write_sets(bench, workers.kind, dir);
      const gpu::OwnKernelTimes own =
          gpu ? gpu::time_own_kernels(bench, o.iters) : gpu::OwnKernelTimes{};
      const std::string case_name = fmt::format("{} with {} requests", name, reqs);
      const WorkerTimes candidate =
          time_on(*workers.candidate, dirs, o.iters, "external", case_name);
      const std::optional<WorkerTimes> baseline =
          workers.baseline
              ? std::optional(time_on(*workers.baseline, dirs, o.iters, "baseline", case_name))
              : std::nullopt;
      fs::remove_all(dir);
      const double ratio =
          baseline && baseline->median_us > 0 ? candidate.median_us / baseline->median_us : 0;
      const bool regression = o.max_slowdown && ratio > *o.max_slowdown;
      const std::int64_t states = static_cast<std::int64_t>(bench.layout.tensors.size());
      out << fmt::format(
          "{:<16} {:>5} {:>8} {:>6} {:>10}  {} {} {:>7}  {} {} {:>9}{}\n", name, reqs,
          bench.num_copying, states,
          gpu ? fmt::format("{:.3f}", static_cast<double>(own.bytes_per_launch) / 1e6) : "-",
          times_cell(candidate.median_us), times_cell(baseline ? baseline->median_us : 0),
          baseline ? fmt::format("{:.3f}", ratio) : "-", times_cell(own.fused_us),
          times_cell(own.memcpy_us),
          own.memcpy_us > 0 ? fmt::format("{:.2f}", own.memcpy_us / candidate.median_us) : "-",
          regression ? fmt::format("  REGRESSION (max {})", *o.max_slowdown) : "");
      out.flush();
      json row = {{"case", name},
                  {"requests", reqs},
                  {"crossing", bench.num_copying},
                  {"states", states},
                  {"input_sets", bench.sets.size()},
                  {"candidate_us", candidate.median_us},
                  {"candidate_min_us", candidate.min_us},
                  {"timing", candidate.timing},
                  {"baseline_us", baseline ? json(baseline->median_us) : json(nullptr)},
                  {"ratio", baseline ? json(ratio) : json(nullptr)},
                  {"fused_us", gpu ? json(own.fused_us) : json(nullptr)},
                  {"memcpy_us", gpu ? json(own.memcpy_us) : json(nullptr)},
                  {"bytes_per_launch", gpu ? json(own.bytes_per_launch) : json(nullptr)},
                  {"regression", regression}};
      if (regression) result.report["regressions"].push_back(row);
      result.report["cases"].push_back(std::move(row));
      result.regression = result.regression || regression;
    }
  }
  result.report["passed"] = !result.regression;
  return result;
}

} // namespace mc::bench
