// FileStore: one file per key in a shared directory.
//
// Keys contain '/', so each becomes a flat, safe file name: "k_" followed by
// the key with every byte outside [A-Za-z0-9_-] percent-encoded; keys whose
// encoding would exceed a file name's length are named by their SHA-256.
// set() writes a temp file and renames it over the key's file, so a reader
// sees the old value or the new one, never a torn one. add() is a
// read-modify-write under an flock on one lock file (Linux maps flock onto
// NFS byte-range locks). get()/wait() poll with a growing sleep, since
// there is no portable change notification on network file systems.
#include <fcntl.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <thread>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/store.h"
#include "giant/ccl/store_detail.h"

namespace giant::ccl {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";
// Well below NAME_MAX (255) so that the temp-file suffix still fits.
constexpr size_t kMaxEncodedKey = 200;
constexpr auto kFirstPollSleep = std::chrono::milliseconds(1);
constexpr auto kMaxPollSleep = std::chrono::milliseconds(50);

std::string hex(const unsigned char* data, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHexDigits[data[i] >> 4];
    out += kHexDigits[data[i] & 15];
  }
  return out;
}

std::string encode_key(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-';
    if (safe) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHexDigits[c >> 4];
      out += kHexDigits[c & 15];
    }
  }
  if (out.size() <= kMaxEncodedKey) return out;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  // In an encoding '%' is always followed by two hex digits, never by 's',
  // so hashed names cannot collide with encoded ones.
  return "%sha256-" + hex(digest, sizeof digest);
}

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw CommError(-1, "file store: cannot " + what + " " + path + ": " + net::describe_errno(err));
}

// Reads the whole file; false if it does not exist (yet).
bool read_file(const std::string& path, Bytes* out) {
  net::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return false;
    throw_io("open", path, errno);
  }
  out->clear();
  unsigned char buffer[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n > 0) {
      out->insert(out->end(), buffer, buffer + n);
    } else if (n == 0) {
      return true;
    } else if (errno != EINTR) {
      throw_io("read", path, errno);
    }
  }
}

void write_all(int fd, const Bytes& value, const std::string& path) {
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      throw_io("write", path, errno);
    }
  }
}

// Holds an exclusive flock on a file for its lifetime. Each holder opens the
// file itself, so threads of one process exclude each other too.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (!fd_.valid()) throw_io("open lock file", path, errno);
    while (::flock(fd_.get(), LOCK_EX) != 0) {
      if (errno != EINTR) throw_io("lock", path, errno);
    }
  }
  ~FileLock() { ::flock(fd_.get(), LOCK_UN); }

 private:
  net::Fd fd_;
};

}  // namespace

FileStore::FileStore(std::string directory) : directory_(std::move(directory)) {
  GIANT_CHECK(!directory_.empty(), "FileStore needs a directory");
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error || !std::filesystem::is_directory(directory_)) {
    throw Error("file store: cannot create directory '" + directory_ + "': " +
                (error ? error.message() : "not a directory"));
  }
}

std::string FileStore::path_for(const std::string& key) const { return directory_ + "/k_" + encode_key(key); }

void FileStore::set(const std::string& key, const Bytes& value) {
  std::string path = path_for(key);
  // A random suffix keeps concurrent writers on different hosts apart.
  unsigned char nonce[8];
  GIANT_CHECK(RAND_bytes(nonce, sizeof nonce) == 1, "RAND_bytes failed");
  std::string temp = directory_ + "/.tmp_" + hex(nonce, sizeof nonce);
  {
    net::Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) throw_io("create", temp, errno);
    try {
      write_all(fd.get(), value, temp);
    } catch (...) {
      ::unlink(temp.c_str());
      throw;
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw_io("rename onto", path, err);
  }
}

Bytes FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  Bytes value;
  // Keys are never deleted, so the file wait() saw is still there.
  GIANT_CHECK(read_file(path_for(key), &value), "store key '", key, "' vanished from ", directory_);
  return value;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  FileLock lock(directory_ + "/.lock");
  Bytes old_value;
  bool exists = read_file(path_for(key), &old_value);
  int64_t result = detail::add_to_decimal(key, exists ? &old_value : nullptr, delta);
  set(key, detail::decimal_bytes(result));
  return result;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Deadline deadline = Deadline::after(timeout);
  auto sleep = kFirstPollSleep;
  std::vector<std::string> missing = keys;
  while (true) {
    std::vector<std::string> still_missing;
    for (const auto& key : missing) {
      std::string path = path_for(key);
      if (::access(path.c_str(), F_OK) == 0) continue;
      if (errno != ENOENT) throw_io("look up", path, errno);
      still_missing.push_back(key);
    }
    missing.swap(still_missing);
    if (missing.empty()) return;
    if (deadline.expired()) {
      throw TimeoutError(-1, "timed out after " + std::to_string(timeout.count()) +
                                 " ms waiting for store key(s) " + detail::describe_keys(missing) + " in " +
                                 directory_);
    }
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        sleep, std::chrono::milliseconds(deadline.remaining_ms(static_cast<int>(sleep.count())))));
    sleep = std::min(sleep * 2, kMaxPollSleep);
  }
}

}  // namespace giant::ccl
