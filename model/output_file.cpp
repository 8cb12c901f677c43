// write_whole_file (output_file.h): open, write every byte, close, rename, each checked.
#include "model/output_file.h"

#include "model/errors.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace mc::model {
namespace {

namespace fs = std::filesystem;

std::string prefix(std::string_view label) {
  return label.empty() ? std::string() : fmt::format("{}: ", label);
}

// What the machine lacks (space, a larger file size limit, a working disk) is exit 3; the rest
// (a missing directory, a permission) is the path the user gave.
bool machine_error(int error) {
  return error == ENOSPC || error == EFBIG || error == EDQUOT || error == EIO || error == EMFILE ||
         error == ENFILE || error == ENOMEM;
}

[[noreturn]] void fail_write(std::string_view label, const fs::path& path, int error) {
  const std::string what =
      fmt::format("{}writing '{}' failed: {}", prefix(label), path.string(), std::strerror(error));
  if (machine_error(error)) throw EnvironmentError(what);
  throw InputError(what);
}

// Every byte of `content` into `fd`, then the close; the errno of the first failure, 0 when
// all went.
int write_and_close(int fd, std::string_view content) {
  int error = 0;
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC; // a write of 0 bytes: nothing more fits
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  // The close is checked too: a file system may report a failed write only there.
  if (::close(fd) != 0 && error == 0 && errno != EINTR) error = errno;
  return error;
}

} // namespace

bool is_special_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  return !ec && fs::exists(status) && !fs::is_regular_file(status) && !fs::is_directory(status);
}

void remove_partial_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(path, ec))) fs::remove(path, ec);
}

void write_whole_file(const fs::path& path, std::string_view content, std::string_view label) {
  if (is_special_file(path)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail_write(label, path, errno);
    if (const int error = write_and_close(fd, content); error != 0) fail_write(label, path, error);
    return;
  }
  const fs::path temporary = fmt::format("{}.tmp-{}", path.string(), ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail_write(label, path, errno);
  if (const int error = write_and_close(fd, content); error != 0) {
    remove_partial_file(temporary);
    fail_write(label, path, error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    remove_partial_file(temporary);
    throw EnvironmentError(fmt::format("{}cannot move '{}' into place: {}", prefix(label),
                                       path.string(), std::strerror(error)));
  }
}

} // namespace mc::model
