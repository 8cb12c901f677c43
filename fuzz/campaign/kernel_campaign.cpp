#include "fuzz/campaign/kernel_campaign.h"

#include "model/case_file.h"
#include "model/errors.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <fstream>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The outcome of one case on the oracle and the backend.
struct Outcome {
  std::optional<std::string> failure;
  std::optional<Difference> difference;
  std::int64_t copies = 0;
  std::int64_t arena_bytes = 0;
};

Outcome run_one(const LaunchSpec& spec, const LaunchRunner& backend) {
  Outcome outcome;
  const model::LaunchCase launch = materialize(spec);
  model::LaunchResult expected;
  try {
    expected = oracle::run_launch(launch);
  } catch (const model::InputError& e) {
    // The generator promises valid cases: a rejected one is a finding about mambacheck.
    outcome.failure = fmt::format("the oracle rejected a generated case: {}", e.what());
    return outcome;
  }
  model::LaunchResult actual;
  try {
    actual = backend(launch);
  } catch (const std::exception& e) {
    outcome.failure = fmt::format("the backend failed: {}", e.what());
    return outcome;
  }
  outcome.difference = compare_results(launch, expected, actual);
  if (outcome.difference) outcome.failure = outcome.difference->message;
  outcome.copies = static_cast<std::int64_t>(expected.decisions.size());
  for (const model::Arena& a : expected.arenas)
    outcome.arena_bytes += a.size_bytes();
  return outcome;
}

void write_counterexample(const LaunchSpec& spec, const Outcome& outcome,
                          const std::filesystem::path& dir) {
  const model::LaunchCase launch = materialize(spec);
  model::save_case(launch, dir);
  // The expected result is the oracle's, so `mambacheck case DIR --check` replays the failure.
  try {
    model::save_result(oracle::run_launch(launch), dir);
  } catch (const model::InputError&) {
    // No oracle result for a case the oracle rejects; the report says why.
  }
  nlohmann::json report = {{"failure", outcome.failure.value_or("")}, {"case", describe(spec)}};
  if (outcome.difference) report["difference"] = to_json(*outcome.difference);
  std::ofstream(dir / "report.json") << report.dump(2) << "\n";
  std::ofstream(dir / "report.txt") << outcome.failure.value_or("") << "\n\n"
                                    << describe(spec) << "\n";
}

// Greedy descent through RapidCheck's shrink tree, bounded in candidates and time.
rc::Shrinkable<LaunchSpec> shrink(rc::Shrinkable<LaunchSpec> current, const LaunchRunner& backend,
                                  const ShrinkLimits& limits, Counterexample& cx) {
  const Clock::time_point start = Clock::now();
  bool improved = true;
  while (improved) {
    improved = false;
    rc::Seq<rc::Shrinkable<LaunchSpec>> candidates = current.shrinks();
    while (auto candidate = candidates.next()) {
      if (cx.shrink_tried >= limits.candidates_max || seconds_since(start) > limits.seconds_max)
        return current;
      ++cx.shrink_tried;
      if (run_one(candidate->value(), backend).failure) {
        current = *candidate;
        ++cx.shrink_steps;
        improved = true;
        break;
      }
    }
  }
  return current;
}

Counterexample record_failure(const KernelCampaignOptions& options, std::uint64_t case_seed,
                              int size, const rc::Shrinkable<LaunchSpec>& original,
                              const Outcome& outcome) {
  Counterexample cx{.case_seed = case_seed, .size = size};
  const std::string stem = fmt::format("kernel-seed{}", case_seed);
  cx.original_dir = options.out_dir / (stem + "-original");
  write_counterexample(original.value(), outcome, cx.original_dir);
  const rc::Shrinkable<LaunchSpec> shrunk = shrink(original, options.backend, options.shrink, cx);
  const Outcome shrunk_outcome = run_one(shrunk.value(), options.backend);
  cx.failure = shrunk_outcome.failure.value_or(*outcome.failure);
  cx.difference = shrunk_outcome.failure ? shrunk_outcome.difference : outcome.difference;
  cx.description = describe(shrunk.value());
  cx.shrunk_dir = options.out_dir / stem;
  write_counterexample(shrunk.value(), shrunk_outcome.failure ? shrunk_outcome : outcome,
                       cx.shrunk_dir);
  return cx;
}

} // namespace

KernelCampaignReport run_kernel_campaign(const KernelCampaignOptions& options) {
  MC_ASSERT(options.backend != nullptr);
  MC_ASSERT(options.max_size >= 0 && options.max_size <= 100);
  const Clock::time_point start = Clock::now();
  const rc::Gen<LaunchSpec> gen = gen_launch_spec(options.gen);
  KernelCampaignReport report;
  for (std::int64_t i = 0; i < options.cases_max; ++i) {
    if (options.seconds_max > 0 && seconds_since(start) > options.seconds_max) break;
    const std::uint64_t case_seed = options.seed + static_cast<std::uint64_t>(i);
    const int size = static_cast<int>(i % (options.max_size + 1));
    const rc::Shrinkable<LaunchSpec> drawn = gen(rc::Random(case_seed), size);
    const LaunchSpec& spec = drawn.value();
    const Outcome outcome = run_one(spec, options.backend);
    ++report.cases;
    ++report.cases_by_kind[std::string(model::to_string(spec.kind))];
    ++report.cases_by_size_class[std::string(to_string(spec.size_class))];
    report.copies_compared += outcome.copies;
    report.arena_bytes_compared += outcome.arena_bytes;
    if (options.on_case) options.on_case(report.cases, spec);
    if (outcome.failure) {
      report.counterexample = record_failure(options, case_seed, size, drawn, outcome);
      break;
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

nlohmann::json to_json(const KernelCampaignOptions& options, const KernelCampaignReport& report) {
  nlohmann::json j = {{"level", "kernel"},
                      {"backend", options.backend_name},
                      {"seed", options.seed},
                      {"max_size", options.max_size},
                      {"cases", report.cases},
                      {"cases_by_kind", report.cases_by_kind},
                      {"cases_by_size_class", report.cases_by_size_class},
                      {"copies_compared", report.copies_compared},
                      {"arena_bytes_compared", report.arena_bytes_compared},
                      {"result", report.counterexample ? "mismatch" : "held"}};
  if (const auto& cx = report.counterexample) {
    j["counterexample"] = {{"case_seed", cx->case_seed},
                           {"size", cx->size},
                           {"failure", cx->failure},
                           {"case", cx->description},
                           {"shrink_steps", cx->shrink_steps},
                           {"shrink_candidates_tried", cx->shrink_tried},
                           {"original_dir", cx->original_dir.string()},
                           {"shrunk_dir", cx->shrunk_dir.string()}};
    if (cx->difference) j["counterexample"]["difference"] = to_json(*cx->difference);
  }
  return j;
}

} // namespace mc::fuzz
