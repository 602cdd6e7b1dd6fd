#include "giant/launch/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

std::string errno_text(int error) { return std::string(::strerror(error)); }

void read_fully(int fd, unsigned char* data, size_t size, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot read " + what + ": " + (n < 0 ? errno_text(errno) : "end of file"));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

std::string random_secret() {
  unsigned char bytes[32];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open /dev/urandom for the store secret: " + errno_text(errno));
  try {
    read_fully(fd, bytes, sizeof bytes, "/dev/urandom");
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  static const char kHex[] = "0123456789abcdef";
  std::string secret;
  for (unsigned char b : bytes) {
    secret += kHex[b >> 4];
    secret += kHex[b & 15];
  }
  return secret;
}

SecretFile::SecretFile(const std::string& directory, const std::string& secret) {
  std::string pattern = directory + (directory.empty() || directory.back() != '/' ? "/" : "") +
                        "giant-launch-secret-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  int fd = ::mkostemp(name.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) throw Error("cannot create a secret file in '" + directory + "': " + errno_text(errno));
  path_ = name.data();
  bool ok = ::fchmod(fd, S_IRUSR | S_IWUSR) == 0;  // whatever the umask
  const char* data = secret.data();
  size_t left = secret.size();
  while (ok && left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) {
      data += n;
      left -= static_cast<size_t>(n);
    }
  }
  int error = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(path_.c_str());
    throw Error("cannot write the secret file '" + path_ + "': " + errno_text(error));
  }
}

SecretFile::~SecretFile() { ::unlink(path_.c_str()); }

}  // namespace giant::launch
