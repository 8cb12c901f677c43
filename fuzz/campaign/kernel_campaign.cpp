#include "fuzz/campaign/kernel_campaign.h"

#include "fuzz/run_case.h"
#include "model/case_file.h"
#include "model/errors.h"
#include "oracle/launch.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What the campaign keeps of one case (run_case.h). The results themselves are dropped at
// once: a big-offset case holds gigabytes of arenas, and a failing case's verdict is kept
// through the whole shrink.
struct Verdict {
  std::optional<std::string> failure;
  std::optional<Difference> difference;
  std::int64_t copies = 0;      // the oracle's decisions, when the backend returned
  std::int64_t arena_bytes = 0; // compared, when the backend returned
  bool rejected = false;        // the oracle called the case invalid: never a shrink result
  bool shrinks_to() const { return failure.has_value() && !rejected; }
};

Verdict run_one(const LaunchSpec& spec, const LaunchRunner& backend) {
  const CaseOutcome outcome = run_case(spec, backend);
  Verdict verdict;
  if (outcome.status == CaseStatus::oracle_rejected) {
    // The generator promises valid cases: a rejected one is a finding about mambacheck.
    verdict.failure = fmt::format("the oracle rejected a generated case: {}", outcome.error);
    verdict.rejected = true;
    return verdict;
  }
  verdict.failure = outcome.failure();
  if (outcome.status == CaseStatus::backend_failed) return verdict;
  verdict.difference = outcome.difference;
  verdict.copies = static_cast<std::int64_t>(outcome.oracle.decisions.size());
  for (const model::Arena& a : outcome.oracle.arenas)
    verdict.arena_bytes += a.size_bytes();
  return verdict;
}

void write_counterexample(const LaunchSpec& spec, const Verdict& verdict,
                          const std::filesystem::path& dir) {
  const model::LaunchCase launch = materialize(spec);
  model::save_case(launch, dir);
  // The expected result is the oracle's, so `mambacheck case DIR --check` replays the failure.
  try {
    model::save_result(oracle::run_launch(launch), dir);
  } catch (const model::InputError&) {
    // No oracle result for a case the oracle rejects; the report says why.
  }
  nlohmann::json report = {{"failure", verdict.failure.value_or("")}, {"case", describe(spec)}};
  if (verdict.difference) report["difference"] = to_json(*verdict.difference);
  std::ofstream(dir / "report.json") << report.dump(2) << "\n";
  std::ofstream(dir / "report.txt") << verdict.failure.value_or("") << "\n\n"
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
      if (run_one(candidate->value(), backend).shrinks_to()) {
        current = *candidate;
        ++cx.shrink_steps;
        improved = true;
        break;
      }
    }
  }
  return current;
}

// `spec` without batch row b: its block-table rows and its per-row entries (V1 kinds: the
// slot arrays, slot == row; V2 kinds: idx_mapping and query_start_loc; slots stay). What is
// left stays valid: rows never share a block they write.
LaunchSpec without_row(const LaunchSpec& spec, std::int32_t b) {
  MC_ASSERT(b >= 0 && b < spec.num_reqs);
  LaunchSpec out = spec;
  const auto at = static_cast<std::size_t>(b);
  for (model::BlockTable& t : out.block_tables.groups) {
    const auto stride = static_cast<std::ptrdiff_t>(t.row_stride);
    t.block_ids.erase(t.block_ids.begin() + static_cast<std::ptrdiff_t>(b) * stride,
                      t.block_ids.begin() + static_cast<std::ptrdiff_t>(b + 1) * stride);
    --t.num_rows;
  }
  model::RequestArrays& r = out.requests;
  const bool v1 =
      spec.kind == model::LaunchKind::postprocess || spec.kind == model::LaunchKind::batch_copy;
  if (v1) {
    for (std::vector<std::int32_t>* v :
         {&r.num_accepted, &r.state_idx, &r.num_scheduled, &r.num_computed, &r.num_draft,
          &r.new_num_computed, &r.src_col, &r.token_bias, &r.num_accepted_out})
      if (v->size() == static_cast<std::size_t>(spec.num_slots)) v->erase(v->begin() + b);
    --out.num_slots;
  } else {
    if (!r.idx_mapping.empty()) r.idx_mapping.erase(r.idx_mapping.begin() + b);
    if (!r.query_start_loc.empty()) {
      const std::int32_t len = r.query_start_loc[at + 1] - r.query_start_loc[at];
      r.query_start_loc.erase(r.query_start_loc.begin() + b + 1);
      for (std::size_t i = at + 1; i < r.query_start_loc.size(); ++i)
        r.query_start_loc[i] -= len;
    }
  }
  --out.num_reqs;
  return out;
}

// After RapidCheck's descent: drop single batch rows (its shrinks cut rows from the end
// only) while the case still fails, within the same limits.
LaunchSpec drop_rows(LaunchSpec current, const LaunchRunner& backend, const ShrinkLimits& limits,
                     Clock::time_point start, Counterexample& cx) {
  for (std::int32_t b = current.num_reqs - 1; b >= 0 && current.num_reqs > 1; --b) {
    if (b >= current.num_reqs) continue;
    if (cx.shrink_tried >= limits.candidates_max || seconds_since(start) > limits.seconds_max)
      break;
    ++cx.shrink_tried;
    LaunchSpec candidate = without_row(current, b);
    if (run_one(candidate, backend).shrinks_to()) {
      current = std::move(candidate);
      ++cx.shrink_steps;
    }
  }
  return current;
}

Counterexample record_failure(const KernelCampaignOptions& options, std::uint64_t case_seed,
                              int size, const rc::Shrinkable<LaunchSpec>& original,
                              const Verdict& verdict) {
  Counterexample cx{.case_seed = case_seed, .size = size};
  const std::string stem = fmt::format("kernel-seed{}", case_seed);
  cx.original_dir = options.out_dir / (stem + "-original");
  write_counterexample(original.value(), verdict, cx.original_dir);
  const Clock::time_point start = Clock::now();
  const LaunchSpec shrunk_spec =
      drop_rows(shrink(original, options.backend, options.shrink, cx).value(), options.backend,
                options.shrink, start, cx);
  const Verdict shrunk = run_one(shrunk_spec, options.backend);
  cx.failure = shrunk.failure.value_or(*verdict.failure);
  cx.difference = shrunk.failure ? shrunk.difference : verdict.difference;
  cx.description = describe(shrunk_spec);
  cx.requests = shrunk_spec.num_reqs;
  cx.copies = shrunk.failure ? shrunk.copies : verdict.copies;
  cx.shrunk_dir = options.out_dir / stem;
  write_counterexample(shrunk_spec, shrunk.failure ? shrunk : verdict, cx.shrunk_dir);
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
    const Verdict verdict = run_one(spec, options.backend);
    ++report.cases;
    ++report.cases_by_kind[std::string(model::to_string(spec.kind))];
    ++report.cases_by_size_class[std::string(to_string(spec.size_class))];
    report.copies_compared += verdict.copies;
    report.arena_bytes_compared += verdict.arena_bytes;
    if (options.on_case) options.on_case(report.cases, spec);
    if (verdict.failure) {
      report.seconds_to_failure = seconds_since(start);
      report.counterexample = record_failure(options, case_seed, size, drawn, verdict);
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
  if (!options.mutant_name.empty()) j["mutant"] = options.mutant_name;
  if (const auto& cx = report.counterexample) {
    j["counterexample"] = {{"case_seed", cx->case_seed},
                           {"size", cx->size},
                           {"failure", cx->failure},
                           {"case", cx->description},
                           {"requests", cx->requests},
                           {"copies", cx->copies},
                           {"shrink_steps", cx->shrink_steps},
                           {"shrink_candidates_tried", cx->shrink_tried},
                           {"original_dir", cx->original_dir.string()},
                           {"shrunk_dir", cx->shrunk_dir.string()}};
    if (cx->difference) j["counterexample"]["difference"] = to_json(*cx->difference);
  }
  return j;
}

} // namespace mc::fuzz
