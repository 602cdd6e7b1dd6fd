// Key-value stores used to bring ranks together (rendezvous).
//
// Values are bytes. get() and wait() block until the keys exist or the
// timeout passes (TimeoutError). A lost store connection is a CommError with
// peer -1. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace giant::ccl {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds delta to the integer stored at key (missing keys count as 0) and
  // returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // The local IP address this process uses to reach the store, if it is
  // remote ("" otherwise): ranks listen on it so that peers on other hosts
  // can reach them by the same route.
  virtual std::string local_address() const { return ""; }
};

Bytes to_bytes(const std::string& s);
std::string to_string(const Bytes& b);

// Every key gets "prefix/" in front: one store serves many communicators.
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::string local_address() const override { return base_->local_address(); }
  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// For ranks as threads of one process.
class MemoryStore : public Store {
 public:
  MemoryStore();
  ~MemoryStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A directory on a file system every rank sees (e.g. NFS). Values are files
// written atomically (temp file + rename); add() takes an flock.
class FileStore : public Store {
 public:
  explicit FileStore(std::string directory);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  std::string path_for(const std::string& key) const;
  std::string directory_;
};

// Limits that bound every TcpStore message, so a hostile or broken client
// can never make the server allocate or wait without bound.
struct TcpStoreLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 64 << 20;
  std::chrono::milliseconds handshake_timeout{10000};
  size_t max_clients = 65536;
};

// Serves a store over TCP. Clients must prove they know the shared secret
// (HMAC-SHA256 challenge-response in both directions; the secret never
// crosses the wire). Runs its own thread(s) until destroyed.
class TcpStoreServer {
 public:
  // port 0 picks a free port; read it back with port().
  TcpStoreServer(const std::string& bind_address, int port, std::string secret,
                 TcpStoreLimits limits = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TcpStore : public Store {
 public:
  // Connects (retrying until connect_timeout) and authenticates. A wrong
  // secret is a giant::Error saying so; an unreachable server a TimeoutError.
  TcpStore(const std::string& host, int port, const std::string& secret,
           std::chrono::milliseconds connect_timeout = std::chrono::seconds(60));
  ~TcpStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::string local_address() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace giant::ccl
