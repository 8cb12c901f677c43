#include "fuzz/campaign/kernel_shrink.h"

#include "model/errors.h"
#include "model/interrupt.h"

#include <chrono>

namespace mc::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `spec` without batch row b (kept valid: rows never share a block they write).
LaunchSpec without_row(const LaunchSpec& spec, std::int32_t b) {
  MC_ASSERT(b >= 0 && b < spec.num_reqs);
  LaunchSpec out = spec;
  const auto at = static_cast<std::size_t>(b);
  // Per-slot tables keep every slot's row: the other rows find theirs by slot.
  if (!model::tables_by_slot(spec.kind)) {
    for (model::BlockTable& t : out.block_tables.groups) {
      const auto stride = static_cast<std::ptrdiff_t>(t.row_stride);
      t.block_ids.erase(t.block_ids.begin() + static_cast<std::ptrdiff_t>(b) * stride,
                        t.block_ids.begin() + static_cast<std::ptrdiff_t>(b + 1) * stride);
      --t.num_rows;
    }
  }
  model::RequestArrays& r = out.requests;
  if (!model::uses_idx_mapping(spec.kind)) {
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

class Shrinker {
public:
  Shrinker(const RunTally& original_runs, std::string key, const CaseJudge& judge,
           const ShrinkLimits& limits)
      : key_(std::move(key)), judge_(judge), limits_(limits),
        runs_per_candidate_(candidate_runs(original_runs)) {}

  bool out_of_budget() {
    if (tried_ >= limits_.candidates_max || model::interrupted()) return true;
    if (limits_.seconds_max > 0 && seconds_since(start_) > limits_.seconds_max) timed_out_ = true;
    return timed_out_;
  }
  bool timed_out() const { return timed_out_; }

  // Whether `candidate` fails with the finding's key within the runs a candidate gets.
  bool fails(const LaunchSpec& candidate) {
    ++tried_;
    for (int run = 0; run < runs_per_candidate_; ++run) {
      const CaseVerdict v = judge_(candidate);
      if (v.rejected) return false; // never shrink into an invalid case
      if (v.failure && v.signature.key() == key_) return true;
    }
    return false;
  }

  // Greedy descent through RapidCheck's shrink tree; every accepted value joins the chain.
  rc::Shrinkable<LaunchSpec> descend(rc::Shrinkable<LaunchSpec> current,
                                     std::vector<LaunchSpec>& chain) {
    bool improved = true;
    while (improved) {
      improved = false;
      rc::Seq<rc::Shrinkable<LaunchSpec>> candidates = current.shrinks();
      while (auto candidate = candidates.next()) {
        if (out_of_budget()) return current;
        if (fails(candidate->value())) {
          current = *candidate;
          chain.push_back(current.value());
          improved = true;
          break;
        }
      }
    }
    return current;
  }

  // After the descent: single batch rows (its shrinks cut rows from the end only).
  void drop_rows(std::vector<LaunchSpec>& chain) {
    LaunchSpec current = chain.back();
    for (std::int32_t b = current.num_reqs - 1; b >= 0 && current.num_reqs > 1; --b) {
      if (b >= current.num_reqs) continue;
      if (out_of_budget()) break;
      LaunchSpec candidate = without_row(current, b);
      if (fails(candidate)) {
        current = std::move(candidate);
        chain.push_back(current);
      }
    }
  }

  RunTally rerun(const LaunchSpec& spec, int reruns) {
    RunTally tally;
    for (int run = 0; run < reruns; ++run) {
      const CaseVerdict v = judge_(spec);
      const bool counts = v.failure && !v.rejected && v.signature.key() == key_;
      tally.add(counts ? v.failure : std::nullopt, v.backend_error);
    }
    return tally;
  }

  std::int32_t tried() const { return tried_; }

private:
  std::string key_;
  const CaseJudge& judge_;
  const ShrinkLimits& limits_;
  int runs_per_candidate_;
  Clock::time_point start_ = Clock::now();
  std::int32_t tried_ = 0;
  bool timed_out_ = false;
};

} // namespace

ShrinkOutcome shrink_finding(const rc::Shrinkable<LaunchSpec>& original,
                             const RunTally& original_runs, const std::string& key,
                             const CaseJudge& judge, int reruns, const ShrinkLimits& limits) {
  MC_ASSERT(reruns >= 1);
  Shrinker shrinker(original_runs, key, judge, limits);
  std::vector<LaunchSpec> chain{original.value()};
  shrinker.descend(original, chain);
  shrinker.drop_rows(chain);
  ShrinkOutcome out{.spec = original.value(),
                    .saved_runs = original_runs,
                    .steps = static_cast<std::int32_t>(chain.size()) - 1};
  // From the smallest back: the first that reproduces on its reruns is saved. A candidate
  // that failed once by chance is passed over; the original is the last resort, and it
  // failed at least on the run that found it.
  const Clock::time_point verify_start = Clock::now();
  for (std::size_t i = chain.size() - 1; i >= 1; --i) {
    if (model::interrupted()) break;
    if (limits.seconds_max > 0 && seconds_since(verify_start) > limits.seconds_max) {
      out.timed_out = true;
      break;
    }
    RunTally tally = shrinker.rerun(chain[i], reruns);
    if (reproducible(tally.failed, tally.runs)) {
      out.spec = chain[i];
      out.saved_runs = std::move(tally);
      out.kept = true;
      break;
    }
  }
  out.tried = shrinker.tried();
  out.timed_out = out.timed_out || shrinker.timed_out();
  return out;
}

} // namespace mc::fuzz
