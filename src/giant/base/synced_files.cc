#include "giant/base/synced_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "giant/base/error.h"

namespace giant {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_io(const std::string& what, const fs::path& path, int error) {
  throw Error("cannot " + what + " " + path.string() + ": " + std::strerror(error));
}

// fsyncs and closes fd (Error naming path when either fails).
void sync_and_close(int fd, const fs::path& path) {
  const bool synced = ::fsync(fd) == 0;
  const int fsync_errno = errno;
  ::close(fd);
  if (!synced) fail_io("fsync", path, fsync_errno);
}

}  // namespace

void sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_io("open", path, errno);
  sync_and_close(fd, path);
}

void write_synced(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("create", path, errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int write_errno = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail_io("write", path, write_errno);
    }
    done += static_cast<size_t>(n);
  }
  sync_and_close(fd, path);
}

}  // namespace giant
