// `--steps-out FILE` and `--explain STEP` of replay and run: what the oracle believes happened
// at each step (harness/step_view.h), one JSON line per step into FILE, and STEP as a table on
// standard output. FILE is opened before the run starts, so a bad path costs no work.
#pragma once

#include "harness/step_view.h"

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

namespace mc::cli {

class StepsOutput {
public:
  // Throws InputError when `path` (non-empty) cannot be written.
  StepsOutput(const std::string& path, std::optional<std::int64_t> explain_step);

  bool wanted() const { return file_.is_open() || explain_step_.has_value(); }
  // The sink for ReplayOptions::on_view / SimulationOptions::on_view.
  std::function<void(const harness::StepView&)> sink();
  // Throws InputError when --explain named a step that never ran.
  void finish() const;

private:
  std::string path_;
  std::ofstream file_;
  std::optional<std::int64_t> explain_step_;
  bool explained_ = false;
  std::int64_t steps_ = 0;
};

} // namespace mc::cli
