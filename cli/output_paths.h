// Files and directories a command writes (--report, --junit, --out, --record, --steps-out):
// checked before any work starts, so a typo costs one line and exit 2 instead of a finished
// campaign; and written through a temporary file that is renamed into place, so a process
// killed while writing never leaves half a report.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace mc::cli {

// The file `path` can be created or replaced: its directory exists and is writable, and it is
// not a directory. Empty: nothing to check. Throws model::InputError ("OPTION: cannot write
// 'PATH': why").
void check_output_file(std::string_view option, const std::string& path);

// Creates the directory `path` with its parents, once it is found writable or creatable (its
// nearest existing ancestor a writable directory). Empty: nothing to do. Throws
// model::InputError when it cannot.
void create_output_dir(std::string_view option, const std::string& path);

// check_output_file, then model::write_whole_file: `content` to PATH.tmp-PID renamed to `path`
// (a device or a FIFO written in place). Throws model::EnvironmentError when the bytes cannot be
// written (a full disk, /dev/full), model::InputError when the place cannot be.
void write_file_atomically(std::string_view option, const std::string& path,
                           std::string_view content);

// A JSON report (--report, --json): `report` indented by 2 and a newline, written atomically to
// `path`; nothing when `path` is empty (the option not given).
void write_json_file(std::string_view option, const std::string& path,
                     const nlohmann::json& report);

} // namespace mc::cli
