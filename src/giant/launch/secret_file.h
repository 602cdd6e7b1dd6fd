// The store's shared secret: random, and handed to the ranks in a file that
// only this user can read, never on a command line (where `ps` shows it).
#pragma once

#include <string>

namespace giant::launch {

// 32 random bytes from /dev/urandom, as 64 hex digits. Throws giant::Error.
std::string random_secret();

// A 0600 file holding the secret, removed when this object goes.
class SecretFile {
 public:
  // Creates giant-launch-secret-XXXXXX in directory. Throws giant::Error.
  SecretFile(const std::string& directory, const std::string& secret);
  ~SecretFile();
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace giant::launch
