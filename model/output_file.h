// Writing a whole output file (a report, a JUnit file, a counterexample's report.json) so that
// a failure is never silent and never leaves half a file where the user looks for one.
//
// A regular file (or a new one) is written to PATH.tmp-PID, which is renamed into place only
// once every byte is written and the file is closed: a process killed meanwhile, or a disk
// that fills, leaves the old file or none. A path that names something else that can be
// written (a character device such as /dev/stdout or /dev/full, a FIFO) is written in place:
// it cannot be replaced by a rename, and as root a rename would replace the device node itself.
#pragma once

#include <filesystem>
#include <string_view>

namespace mc::model {

// Writes `content` as the whole of `path`. `label` (an option, "--report"; may be empty) starts
// the messages. Throws EnvironmentError naming the path when a write, the close or the rename
// fails for the machine's reasons (a full disk, a file size limit, an I/O error), InputError
// when the place cannot be written (no such directory, no permission).
void write_whole_file(const std::filesystem::path& path, std::string_view content,
                      std::string_view label = {});

// Removes `path` when it is a regular file (a file cut short by a failed write); leaves a device
// or a FIFO, which a write in place went to, alone.
void remove_partial_file(const std::filesystem::path& path);

// True when `path` exists and is neither a regular file nor a directory: written in place.
bool is_special_file(const std::filesystem::path& path);

} // namespace mc::model
