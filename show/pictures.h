// report.html for a counterexample: the runs a picture needs, then the picture.
//
// kernel_picture: the oracle runs the case (its result is the expected one) and the backend
// under test runs it again for the actual bytes; `isolate`, where given, runs the backend and
// the drawing in a forked child (fuzz::run_isolated_payload), so a kernel that faults costs the
// picture its actual side, not the process. engine_picture: the trace is replayed against the
// backend (with the mutants of `replay`) for the first difference and the bytes of both sides after
// it, and on the oracle with the clean host runner for the views of every step (so the timeline
// goes on past a backend's failure up to the trace's end or the oracle's own finding).
#pragma once

#include "harness/replay.h"
#include "model/launch.h"
#include "show/html.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace mc::show {

// Runs `draw` where a backend that faults cannot take this process down: the page, or nullopt
// with why in `failure` ("killed by SIGSEGV ..."). fuzz::run_isolated_payload is one; empty:
// drawn in this process.
using Isolate = std::function<std::optional<std::string>(const std::function<std::string()>& draw,
                                                         std::string& failure)>;

using Backend = std::function<model::LaunchResult(const model::LaunchCase&)>;

// Throws nothing for a backend that fails (the page says so); the oracle rejecting the case
// gives a page saying that.
std::string kernel_picture(const model::LaunchCase& launch, const Backend& backend,
                           const Isolate& isolate, const std::string& actual_name, Header header);

struct EnginePictureOptions {
  harness::ReplayOptions replay; // the backend run: executor, runner, v1 path, mutants
  Isolate isolate;               // that run in a forked child (host executor only)
  std::string actual_name = "backend";
  Header header; // failure: filled from the replay when empty
};

// Throws model::InputError for a malformed trace (as replay does).
std::string engine_picture(const std::filesystem::path& trace, const EnginePictureOptions& options);

// Writes `html` to `file` (model::write_whole_file: all of it or nothing); false when it cannot
// be written.
bool write_picture(const std::filesystem::path& file, const std::string& html);

} // namespace mc::show
