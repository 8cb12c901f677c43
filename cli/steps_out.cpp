// --steps-out and --explain (steps_out.h).
#include "cli/steps_out.h"

#include "cli/output_paths.h"
#include "model/errors.h"
#include "model/output_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace mc::cli {

StepsOutput::StepsOutput(const std::string& path, std::optional<std::int64_t> explain_step)
    : path_(path), explain_step_(explain_step) {
  check_output_file("--steps-out", path);
  if (explain_step_ && *explain_step_ < 0)
    model::fail_input("--explain: expected a step index >= 0, got {}", *explain_step_);
  if (path.empty()) return;
  file_.open(path, std::ios::trunc);
  if (!file_) model::fail_input("--steps-out: cannot write '{}'", path);
}

StepsOutput::~StepsOutput() {
  if (!file_.is_open() || finished_) return;
  file_.close();
  model::remove_partial_file(path_);
}

std::function<void(const harness::StepView&)> StepsOutput::sink() {
  if (!file_.is_open() && !explain_step_) return {};
  return [this](const harness::StepView& view) {
    ++steps_;
    if (file_.is_open()) {
      file_ << harness::to_json(view).dump() << '\n';
      if (!file_) fail_write(errno);
    }
    if (explain_step_ && view.step == *explain_step_) {
      explained_ = true;
      fmt::print("{}", harness::explain(view));
    }
  };
}

void StepsOutput::fail_write(int error) {
  // Cut mid-line the file does not read back: it goes (a device written in place stays).
  file_.close();
  model::remove_partial_file(path_);
  throw model::EnvironmentError(
      fmt::format("--steps-out: writing '{}' failed: {}{}", path_, std::strerror(error),
                  model::is_special_file(path_) ? "" : " (the partial file was removed)"));
}

void StepsOutput::finish() {
  if (file_.is_open()) {
    // The last lines may still be in the stream's buffer: a write that fails only now counts.
    file_.flush();
    if (!file_) fail_write(errno);
    file_.close();
    if (!file_) fail_write(errno);
  }
  finished_ = true;
  if (explain_step_ && !explained_)
    model::fail_input("--explain: no step {} among the {} steps that ran", *explain_step_, steps_);
  if (!path_.empty()) fmt::print("steps: {}\n", path_);
}

} // namespace mc::cli
