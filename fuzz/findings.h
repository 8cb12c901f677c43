// What a failing case is, beyond "it failed": how reliably it fails on the backend under
// test (reruns and their classification), what kind of failure it is (a signature that tells
// one bug from another), and how much of it a shrinker may trust. Shared by the kernel and
// the engine campaign (docs/fuzzing.md, "Findings").
//
// A failure that depends on thread scheduling (a race between the programs of one launch,
// an uninitialised read) passes some reruns and fails others, or fails with different bytes.
// A report that calls it deterministic, or a shrinker that keeps a candidate which failed
// once and never again, hands the reviewer a counterexample that passes when rerun; so every
// finding is rerun before it is reported, and a shrunk case is kept only when it fails on at
// least half of its reruns.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mc::fuzz {

enum class Classification : std::uint8_t {
  deterministic,    // every run failed, with the same first difference
  nondeterministic, // some runs held, or runs differed: a race or an uninitialised read
  backend_error,    // the backend threw, crashed, wrote outside its buffers or timed out
};
std::string_view to_string(Classification classification);

inline constexpr int kRerunsDefault = 5;

// The runs of one case on the backend under test.
struct RunTally {
  int runs = 0;
  int failed = 0;
  bool backend_error = false;            // one run ended in an exception, crash or timeout
  std::set<std::string> fingerprints;    // distinct failures among the failing runs
  std::vector<std::string> run_failures; // per run: its first difference, empty when it held

  // One run: `fingerprint` names its failure exactly (nothing when it held).
  void add(const std::optional<std::string>& fingerprint, bool is_backend_error);
  Classification classify() const;
  double rate() const { return runs == 0 ? 0.0 : static_cast<double>(failed) / runs; }
  std::string summary() const; // "failed 4 of 6 runs"
};

// One more run of a finding's case: `failure` with signature key `run_key` (nothing when the
// run held). A failure of another key is a different failure of the case: it counts, with
// that key in its fingerprint, so the case is not deterministic.
void add_run(RunTally& tally, const std::optional<std::string>& failure, const std::string& run_key,
             const std::string& key, bool is_backend_error);

// How many runs a shrink candidate gets before it counts as passing: one when every run of
// the finding failed; otherwise enough that a candidate failing at the finding's observed
// rate is missed with probability under 5 % (at most kCandidateRunsMax).
inline constexpr int kCandidateRunsMax = 24;
int candidate_runs(const RunTally& finding);

// Whether a shrunk case that failed `failed` of `reruns` reruns may be saved as the
// counterexample: it failed in at least half of them, and never in none.
bool reproducible(int failed, int reruns);

// A finding's identity. Two failures with the same key are one bug seen again. The key names
// the failing row by its most telling feature only (`shape`), so one bug seen on rows that
// differ in incidental ways (a shared page here, a null source there) stays one finding; every
// feature is still reported. The classification is shown with the signature but is not part
// of the key, so a known finding stays known whether a rerun classifies it as deterministic
// or not.
struct Signature {
  std::string level;      // "kernel" or "engine"
  std::string kind;       // the launch kind (kernel level) or the first failing step's check
  std::string difference; // state-bytes, stray-write, page-padding, request-array-NAME,
                          // decisions, status, backend-error, crash, ...
  std::string shape;      // the failing row's first feature in kShapeOrder, or "-"
  std::vector<std::string> features; // of the failing row, sorted: same-block-shift,
                                     // resets-accepted, ds-bias, null-source, skipped-row, ...
  Classification classification = Classification::deterministic;

  std::string key() const;       // level:kind:difference:shape
  std::string to_string() const; // level:kind:classification:difference:shape
};

// The features that name a row's shape, most telling first.
inline constexpr std::string_view kShapeOrder[] = {
    "offset-past-4GiB", "skipped-row", "same-block-shift", "ds-bias",
    "null-source",      "resets-accepted", "copy",        "no-copy"};

// The first of kShapeOrder among `features`, or "-".
std::string shape_of(const std::vector<std::string>& features);

// Whether `skip` (a --skip-signature argument, as printed by Signature::to_string or as the
// key) names `signature`; the classification field of `skip`, when present, is ignored.
bool signature_matches(const Signature& signature, std::string_view skip);

// Whether --skip-signature arguments `skips` name `signature`.
bool skipped_by(const Signature& signature, const std::vector<std::string>& skips);

// A signature as a verdict travels between processes; the classification goes with it.
nlohmann::json to_json(const Signature& signature);
Signature signature_from_json(const nlohmann::json& j);

} // namespace mc::fuzz
