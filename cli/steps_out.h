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
  // Throws InputError when `path` (non-empty) cannot be written (check_output_file first).
  StepsOutput(const std::string& path, std::optional<std::int64_t> explain_step);
  // Without finish(), the run ended by an error (a bad trace line, say): the file it cut short
  // goes.
  ~StepsOutput();
  StepsOutput(const StepsOutput&) = delete;
  StepsOutput& operator=(const StepsOutput&) = delete;

  // The sink for ReplayOptions::on_view / SimulationOptions::on_view; empty when neither FILE
  // nor STEP was asked for.
  std::function<void(const harness::StepView&)> sink();
  // Writes out what the file's buffer still holds, then closes it and prints "steps: FILE":
  // throws EnvironmentError when that fails (a full disk), InputError when --explain named a
  // step that never ran.
  void finish();

private:
  [[noreturn]] void fail_write(int error);

  std::string path_;
  std::ofstream file_;
  std::optional<std::int64_t> explain_step_;
  bool explained_ = false;
  bool finished_ = false;
  std::int64_t steps_ = 0;
};

} // namespace mc::cli
