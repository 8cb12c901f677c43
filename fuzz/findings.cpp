#include "fuzz/findings.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mc::fuzz {

std::string_view to_string(Classification classification) {
  switch (classification) {
  case Classification::deterministic:
    return "deterministic";
  case Classification::nondeterministic:
    return "nondeterministic";
  case Classification::backend_error:
    return "backend-error";
  }
  MC_ASSERT(false);
  return "";
}

void RunTally::add(const std::optional<std::string>& fingerprint, bool is_backend_error) {
  ++runs;
  run_failures.push_back(fingerprint.value_or(""));
  if (!fingerprint) return;
  ++failed;
  fingerprints.insert(*fingerprint);
  backend_error = backend_error || is_backend_error;
}

Classification RunTally::classify() const {
  MC_ASSERT(failed > 0);
  if (backend_error) return Classification::backend_error;
  if (failed == runs && fingerprints.size() == 1) return Classification::deterministic;
  return Classification::nondeterministic;
}

std::string RunTally::summary() const { return fmt::format("failed {} of {} runs", failed, runs); }

void add_run(RunTally& tally, const std::optional<std::string>& failure, const std::string& run_key,
             const std::string& key, bool is_backend_error) {
  std::optional<std::string> fingerprint = failure;
  if (failure && run_key != key) fingerprint = run_key + ": " + *failure;
  tally.add(fingerprint, failure && is_backend_error); // a run that held is no backend error
}

bool skipped_by(const Signature& signature, const std::vector<std::string>& skips) {
  return std::any_of(skips.begin(), skips.end(),
                     [&](const std::string& skip) { return signature_matches(signature, skip); });
}

int candidate_runs(const RunTally& finding) {
  MC_ASSERT(finding.failed > 0);
  if (finding.failed == finding.runs) return 1;
  // (1 - p)^r < 0.05
  const double p = finding.rate();
  const int r = static_cast<int>(std::ceil(std::log(0.05) / std::log1p(-p)));
  return std::clamp(r, 1, kCandidateRunsMax);
}

bool reproducible(int failed, int reruns) {
  MC_ASSERT(reruns > 0 && failed >= 0 && failed <= reruns);
  return failed > 0 && 2 * failed >= reruns;
}

std::string shape_of(const std::vector<std::string>& features) {
  for (const std::string_view shape : kShapeOrder)
    if (std::find(features.begin(), features.end(), shape) != features.end())
      return std::string(shape);
  return "-";
}

std::string Signature::key() const {
  return fmt::format("{}:{}:{}:{}", level, kind, difference, shape.empty() ? "-" : shape);
}

std::string Signature::to_string() const {
  return fmt::format("{}:{}:{}:{}:{}", level, kind, fuzz::to_string(classification), difference,
                     shape.empty() ? "-" : shape);
}

bool signature_matches(const Signature& signature, std::string_view skip) {
  if (skip == signature.key()) return true;
  // The printed form carries the classification as its third field: drop it. The fields after
  // it are the key's own, a difference that holds a colon included ("finding:wrong_read").
  const std::size_t first = skip.find(':');
  const std::size_t second = first == std::string_view::npos ? first : skip.find(':', first + 1);
  const std::size_t third = second == std::string_view::npos ? second : skip.find(':', second + 1);
  if (third == std::string_view::npos) return false;
  const std::string_view classification = skip.substr(second + 1, third - second - 1);
  if (classification != to_string(Classification::deterministic) &&
      classification != to_string(Classification::nondeterministic) &&
      classification != to_string(Classification::backend_error))
    return false;
  return fmt::format("{}{}", skip.substr(0, second + 1), skip.substr(third + 1)) == signature.key();
}

nlohmann::json to_json(const Signature& s) {
  return {{"level", s.level},       {"kind", s.kind},         {"difference", s.difference},
          {"shape", s.shape},       {"features", s.features},
          {"classification", static_cast<int>(s.classification)}};
}

Signature signature_from_json(const nlohmann::json& j) {
  const int classification = j.at("classification").get<int>();
  MC_ASSERT(classification >= 0 && classification <= 2);
  return Signature{.level = j.at("level").get<std::string>(),
                   .kind = j.at("kind").get<std::string>(),
                   .difference = j.at("difference").get<std::string>(),
                   .shape = j.at("shape").get<std::string>(),
                   .features = j.at("features").get<std::vector<std::string>>(),
                   .classification = static_cast<Classification>(classification)};
}

} // namespace mc::fuzz
