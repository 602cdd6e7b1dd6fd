// The TcpStore wire format (internal: for tcp_store.cc and its tests).
//
// Every message is a frame, a u32 little-endian payload length
// followed by the payload. The receiver checks the length against its limits
// before allocating anything.
//
// Handshake (both directions authenticated, the secret never sent):
//   server -> client  magic "GIANTST1" + server nonce (32 random bytes)
//   client -> server  HMAC(secret, "giant-store-client" || server nonce) + client nonce
//   server -> client  status 1 + HMAC(secret, "giant-store-server" || client nonce),
//                     or status 0 and a close when the client's proof is wrong.
// Requests after it (strings are u32 length + bytes, integers little-endian):
//   set:  op 1, key, value (rest of the frame)         -> ok
//   get:  op 2, i64 timeout_ms, key                    -> ok + value (rest) | timeout
//   add:  op 3, i64 delta, key                         -> ok + i64 | error + message
//   wait: op 4, i64 timeout_ms, u32 n, n keys          -> ok | timeout + u32 n + missing keys
// A timeout of 0 or less waits forever (Deadline::after).
#pragma once

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/store.h"

namespace giant::ccl::store_wire {

constexpr char kMagic[8] = {'G', 'I', 'A', 'N', 'T', 'S', 'T', '1'};
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
// Every handshake frame is at most this long.
constexpr size_t kMaxHandshakeFrame = 80;
// Room for the op code, integers and the key's length field around a value.
constexpr size_t kFrameOverhead = 64;

enum class Op : uint8_t { set = 1, get = 2, add = 3, wait = 4 };
enum class Status : uint8_t { ok = 0, timeout = 1, error = 2 };

// A malformed or oversized message: the sender is dropped.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

using Mac = std::array<uint8_t, kMacBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;

inline Nonce random_nonce() {
  Nonce nonce;
  GIANT_CHECK(RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) == 1, "RAND_bytes failed");
  return nonce;
}

inline Mac prove(const std::string& secret, const char* label, const Nonce& nonce) {
  Bytes message(label, label + std::strlen(label));
  message.insert(message.end(), nonce.begin(), nonce.end());
  Mac mac;
  unsigned int length = 0;
  unsigned char* ok = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(),
                           message.size(), mac.data(), &length);
  GIANT_CHECK(ok != nullptr && length == kMacBytes, "HMAC-SHA256 failed");
  return mac;
}

inline bool same_mac(const Mac& a, const uint8_t* b) { return CRYPTO_memcmp(a.data(), b, kMacBytes) == 0; }

class Writer {
 public:
  Writer() : bytes_(4, 0) {}  // room for the frame length
  Writer& u8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  Writer& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Writer& i64(int64_t v) {
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(u >> (8 * i)));
    return *this;
  }
  Writer& raw(const uint8_t* data, size_t n) {
    bytes_.insert(bytes_.end(), data, data + n);
    return *this;
  }
  Writer& str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    return raw(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  // The finished frame: length prefix patched in.
  const Bytes& frame() {
    auto n = static_cast<uint32_t>(bytes_.size() - 4);
    for (int i = 0; i < 4; ++i) bytes_[i] = static_cast<uint8_t>(n >> (8 * i));
    return bytes_;
  }

 private:
  Bytes bytes_;
};

class Reader {
 public:
  explicit Reader(const Bytes& payload) : data_(payload.data()), left_(payload.size()) {}
  uint8_t u8() { return take(1)[0]; }
  uint32_t u32() {
    const uint8_t* p = take(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
    return v;
  }
  int64_t i64() {
    const uint8_t* p = take(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return static_cast<int64_t>(v);
  }
  const uint8_t* raw(size_t n) { return take(n); }
  std::string str(size_t max_bytes) {
    uint32_t n = u32();
    if (n > max_bytes) throw ProtocolError("a string of " + std::to_string(n) + " bytes exceeds the limit");
    const uint8_t* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  // A u32 count, then that many strings of at most max_bytes each. Each
  // string takes at least its 4-byte length, so the count is bounded by the
  // message before anything is reserved for it.
  std::vector<std::string> str_list(size_t max_bytes) {
    const uint32_t count = u32();
    if (count > left_ / 4) throw ProtocolError("a list of more strings than the message holds");
    std::vector<std::string> out;
    for (uint32_t i = 0; i < count; ++i) out.push_back(str(max_bytes));
    return out;
  }
  Bytes rest() {
    Bytes out(data_, data_ + left_);
    left_ = 0;
    return out;
  }
  size_t left() const { return left_; }
  void expect_end() const {
    if (left_ != 0) throw ProtocolError("message has " + std::to_string(left_) + " unexpected trailing bytes");
  }

 private:
  const uint8_t* take(size_t n) {
    if (n > left_) throw ProtocolError("message is truncated");
    const uint8_t* p = data_;
    data_ += n;
    left_ -= n;
    return p;
  }
  const uint8_t* data_;
  size_t left_;
};

// The server's side of the handshake on a client's new connection:
// ProtocolError for a malformed or wrong proof (after telling the client).
void serve_handshake(int fd, const std::string& secret, const Deadline& deadline);
// The client's side, with the server at `where` (for messages): giant::Error
// when the server refuses the proof or cannot prove its own.
void client_handshake(int fd, const std::string& secret, const std::string& where, const Deadline& deadline);

// A request as the server reads it.
struct Request {
  Op op = Op::set;
  std::string key;                // set, get, add
  Bytes value;                    // set
  int64_t timeout_ms = 0;         // get, wait
  int64_t delta = 0;              // add
  std::vector<std::string> keys;  // wait
};
// A request frame's payload read and checked against the limits:
// ProtocolError for one that is malformed, unknown or over them.
Request parse_request(const Bytes& payload, size_t max_key_bytes, size_t max_value_bytes);

// A reply as the client reads it.
struct Reply {
  Status status = Status::ok;
  Bytes value;                       // get: ok
  int64_t number = 0;                // add: ok
  std::string message;               // add: error
  std::vector<std::string> missing;  // wait: timeout
};
// The payload of the reply to a request of `op`, checked: ProtocolError for
// one that the server never sends.
Reply parse_reply(Op op, const Bytes& payload, size_t max_key_bytes, size_t max_value_bytes);

inline void send_frame(int fd, Writer& message, const Deadline& deadline) {
  const Bytes& frame = message.frame();
  net::send_all(fd, frame.data(), frame.size(), deadline);
}

// Reads one frame, refusing (before allocating) any longer than max_bytes.
inline Bytes recv_frame(int fd, size_t max_bytes, const Deadline& deadline) {
  uint8_t header[4];
  net::recv_all(fd, header, sizeof header, deadline);
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(header[i]) << (8 * i);
  if (length > max_bytes) {
    throw ProtocolError("announced a message of " + std::to_string(length) + " bytes, over the limit of " +
                        std::to_string(max_bytes));
  }
  Bytes payload(length);
  net::recv_all(fd, payload.data(), payload.size(), deadline);
  return payload;
}

}  // namespace giant::ccl::store_wire
