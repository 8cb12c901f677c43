// A kernel-level fuzz campaign: generated launch cases run on the oracle and on a backend,
// compared exactly; the first failure is shrunk (bounded in steps and time) and written,
// before and after shrinking, as replayable case directories (model/CASE_FORMAT.md) with
// a report naming the first difference (DESIGN.md, "Counterexamples").
//
// Case i draws from seed + i at a size that cycles over 0..max_size, so a campaign mixes
// tiny cases with production-like grids from the start; the same seed gives the same cases,
// the same failure and the same report.
#pragma once

#include "fuzz/compare.h"
#include "fuzz/gen_launch.h"
#include "fuzz/run_case.h"
#include "model/launch.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace mc::fuzz {

struct ShrinkLimits {
  std::int32_t candidates_max = 4000; // shrink candidates tried
  double seconds_max = 60.0;
};

struct KernelCampaignOptions {
  std::uint64_t seed = 1;
  std::int64_t cases_max = 1000; // stop after this many cases...
  double seconds_max = 0.0;      // ...or after this long (0: no time limit)
  int max_size = 100;            // generator size parameter, 0..100
  GenOptions gen = GenOptions::host_default();
  std::string backend_name; // for reports and the reproduce command
  LaunchRunner backend;
  std::string mutant_name; // the kernel mutant `backend` runs (--mutant); empty: the clean kernels
  std::filesystem::path out_dir = "mc-out"; // counterexamples go here
  ShrinkLimits shrink;
  std::function<void(std::int64_t cases, const LaunchSpec&)> on_case; // progress
};

struct Counterexample {
  std::uint64_t case_seed = 0;
  int size = 0;
  std::string failure; // the first difference, or the exception of a backend
  std::optional<Difference> difference;
  std::string description;       // fuzz::describe of the shrunk spec
  std::int32_t requests = 0;     // batch rows of the shrunk launch
  std::int64_t copies = 0;       // the oracle's copy decisions on the shrunk launch
  std::int32_t shrink_steps = 0; // accepted shrinks
  std::int32_t shrink_tried = 0; // candidates tried
  std::filesystem::path original_dir;
  std::filesystem::path shrunk_dir;
};

struct KernelCampaignReport {
  std::int64_t cases = 0;
  std::map<std::string, std::int64_t> cases_by_kind;
  std::map<std::string, std::int64_t> cases_by_size_class;
  std::int64_t copies_compared = 0;
  std::int64_t arena_bytes_compared = 0;
  double seconds = 0.0;
  double seconds_to_failure = 0.0; // until the failing case was found (no shrinking)
  std::optional<Counterexample> counterexample;
};

KernelCampaignReport run_kernel_campaign(const KernelCampaignOptions& options);

// Deterministic for a seed: holds no timings (those go to the terminal).
nlohmann::json to_json(const KernelCampaignOptions& options, const KernelCampaignReport& report);

} // namespace mc::fuzz
