// `mambacheck fuzz --level engine`: see fuzz_engine.h.
#include "cli/fuzz_engine.h"

#include <fmt/format.h>

#include <iostream>

namespace mc::cli {

std::string counts_line(const fuzz::CampaignReport& r, const char* by) {
  std::string line;
  if (const auto it = r.cases_by.find(by); it != r.cases_by.end())
    for (const auto& [name, n] : it->second)
      line += fmt::format(" {}={}", name, n);
  return line;
}

void print_not_shrunk(std::int32_t candidates_tried) {
  std::cout << fmt::format("  not shrunk: no smaller case failed on at least half of its reruns "
                           "({} candidates tried); the original is saved\n",
                           candidates_tried);
}

void print_shrink_timed_out(const fuzz::CampaignOptions& c) {
  std::cout << fmt::format("  the shrink stopped at its time bound ({} s, --shrink-time): on "
                           "another machine or load it may stop elsewhere\n",
                           c.shrink.seconds_max);
}

void print_engine_summary(const fuzz::CampaignOptions& c, const fuzz::CampaignReport& r,
                          const fuzz::EngineLevel& level) {
  const double s = r.seconds > 0 ? r.seconds : 1e-9;
  const std::int64_t steps = r.total("steps");
  std::cout << fmt::format("engine level, backend {}, seed {}{}: {} cases, {} steps in {:.1f} s "
                           "({:.1f} cases/s, {:.0f} steps/s), {:.1f} MiB of arenas compared\n",
                           c.backend_name, c.seed,
                           c.jobs > 1 ? fmt::format(", {} jobs", c.jobs) : "", r.cases, steps,
                           r.seconds, static_cast<double>(r.cases) / s,
                           static_cast<double>(steps) / s,
                           static_cast<double>(r.total("bytes_compared")) / (1 << 20));
  std::cout << "  presets:" << counts_line(r, "preset") << "\n  runners:"
            << counts_line(r, "runner") << "\n  scheduling:" << counts_line(r, "scheduling")
            << "\n";
  if (!r.stopped.empty()) std::cout << "engine level: stopped early: " << r.stopped << "\n";
  if (const std::int64_t refused = r.total("refused_by_manager"); refused > 0)
    std::cout << fmt::format("  block manager: refused the sizes of {} cases (not run)\n",
                             refused);
  if (level.steer_epoch() > 0)
    std::cout << fmt::format("  steer: epochs of {} cases, {} boosted; {} epoch starts waited "
                             "{:.1f} s for the epoch before to end\n",
                             level.steer_epoch(), level.steer_epochs.size(), level.steer_barriers,
                             level.steer_stall_seconds);
}

void print_engine_finding(const fuzz::CampaignOptions& c, const fuzz::Finding& f) {
  std::cout << fmt::format("{} (engine case seed {}, size {}): {}\n",
                           f.skipped ? "KNOWN" : "MISMATCH", f.first_case_seed, f.first_size,
                           f.failure);
  std::cout << fmt::format("  signature {}\n", f.signature.to_string());
  std::cout << fmt::format("  {} ({}); {} failing case{} so far\n", f.runs.summary(),
                           fuzz::to_string(f.signature.classification), f.cases,
                           f.cases == 1 ? "" : "s");
  if (f.signature.classification != fuzz::Classification::deterministic)
    for (std::size_t i = 0; i < f.runs.run_failures.size(); ++i)
      std::cout << fmt::format("    run {}: {}\n", i + 1,
                               f.runs.run_failures[i].empty() ? "held" : f.runs.run_failures[i]);
  const auto* cx = f.counterexample_as<fuzz::EngineCounterexample>();
  if (cx == nullptr) return;
  if (cx->shrink_kept)
    std::cout << fmt::format("  shrunk to {} steps, {} requests ({} shrinks, {} candidates; the "
                             "shrunk case {}): {}\n",
                             cx->steps, cx->requests, cx->shrink_steps, cx->shrink_tried,
                             cx->saved_runs.summary(), cx->failure);
  else
    print_not_shrunk(cx->shrink_tried);
  if (cx->shrink_timed_out) print_shrink_timed_out(c);
  std::cout << fmt::format("  case: {}\n", cx->description);
  if (!cx->dir.empty())
    std::cout << fmt::format("  counterexample: {} (before shrinking: {}), report {}\n",
                             cx->shrunk_trace.string(), cx->original_trace.string(),
                             (cx->dir / "report.txt").string());
  if (!cx->picture.empty()) std::cout << fmt::format("  picture: {}\n", cx->picture.string());
  if (!cx->steps_view.empty())
    std::cout << fmt::format("  steps as the oracle saw them: {}\n", cx->steps_view.string());
  std::cout << fmt::format("  reproduce: {}\n", cx->reproduce);
  if (!cx->replay.empty()) std::cout << fmt::format("  replay the trace: {}\n", cx->replay);
}

} // namespace mc::cli
