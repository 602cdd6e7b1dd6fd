#include "giant/ccl/tcp_store_wire.h"

namespace giant::ccl::store_wire {

void serve_handshake(int fd, const std::string& secret, const Deadline& deadline) {
  Nonce server_nonce = random_nonce();
  Writer hello;
  hello.raw(reinterpret_cast<const uint8_t*>(kMagic), sizeof kMagic).raw(server_nonce.data(), kNonceBytes);
  send_frame(fd, hello, deadline);

  Bytes answer = recv_frame(fd, kMaxHandshakeFrame, deadline);
  if (answer.size() != kMacBytes + kNonceBytes) throw ProtocolError("malformed handshake");
  Reader reader(answer);
  const uint8_t* client_mac = reader.raw(kMacBytes);
  Nonce client_nonce;
  std::memcpy(client_nonce.data(), reader.raw(kNonceBytes), kNonceBytes);
  if (!same_mac(prove(secret, "giant-store-client", server_nonce), client_mac)) {
    Writer refusal;
    refusal.u8(0);
    try {
      send_frame(fd, refusal, deadline);
    } catch (const CommError&) {
    }
    throw ProtocolError("authentication failed (wrong secret?)");
  }
  Mac server_mac = prove(secret, "giant-store-server", client_nonce);
  Writer accept;
  accept.u8(1).raw(server_mac.data(), kMacBytes);
  send_frame(fd, accept, deadline);
}

void client_handshake(int fd, const std::string& secret, const std::string& where, const Deadline& deadline) {
  Bytes hello = recv_frame(fd, kMaxHandshakeFrame, deadline);
  if (hello.size() != sizeof kMagic + kNonceBytes || std::memcmp(hello.data(), kMagic, sizeof kMagic) != 0) {
    throw Error("the server at " + where + " is not a Giant store (unexpected greeting)");
  }
  Nonce server_nonce;
  std::memcpy(server_nonce.data(), hello.data() + sizeof kMagic, kNonceBytes);
  Nonce client_nonce = random_nonce();
  Mac client_mac = prove(secret, "giant-store-client", server_nonce);
  Writer answer;
  answer.raw(client_mac.data(), kMacBytes).raw(client_nonce.data(), kNonceBytes);
  send_frame(fd, answer, deadline);

  Bytes verdict = recv_frame(fd, kMaxHandshakeFrame, deadline);
  if (verdict.size() == 1 && verdict[0] == 0) {
    throw Error("store at " + where + " refused authentication: wrong secret?");
  }
  if (verdict.size() != 1 + kMacBytes || verdict[0] != 1 ||
      !same_mac(prove(secret, "giant-store-server", client_nonce), verdict.data() + 1)) {
    throw Error("store at " + where +
                " failed to prove it knows the secret: wrong secret on the server, or not a Giant store?");
  }
}

Request parse_request(const Bytes& payload, size_t max_key_bytes, size_t max_value_bytes) {
  Reader reader(payload);
  Request request;
  request.op = static_cast<Op>(reader.u8());
  switch (request.op) {
    case Op::set:
      request.key = reader.str(max_key_bytes);
      if (reader.left() > max_value_bytes) throw ProtocolError("value over the limit");
      request.value = reader.rest();
      return request;
    case Op::get:
      request.timeout_ms = reader.i64();
      request.key = reader.str(max_key_bytes);
      reader.expect_end();
      return request;
    case Op::add:
      request.delta = reader.i64();
      request.key = reader.str(max_key_bytes);
      reader.expect_end();
      return request;
    case Op::wait:
      request.timeout_ms = reader.i64();
      request.keys = reader.str_list(max_key_bytes);
      reader.expect_end();
      return request;
  }
  throw ProtocolError("unknown request " + std::to_string(static_cast<int>(request.op)));
}

Reply parse_reply(Op op, const Bytes& payload, size_t max_key_bytes, size_t max_value_bytes) {
  Reader reader(payload);
  Reply reply;
  reply.status = static_cast<Status>(reader.u8());
  auto unexpected = [&] {
    return ProtocolError("status " + std::to_string(static_cast<int>(reply.status)) + " in a reply of " +
                         std::to_string(payload.size()) + " bytes");
  };
  switch (op) {
    case Op::set:
      if (reply.status != Status::ok) throw unexpected();
      break;
    case Op::get:
      if (reply.status == Status::ok) {
        reply.value = reader.rest();
      } else if (reply.status != Status::timeout) {
        throw unexpected();
      }
      break;
    case Op::add:
      if (reply.status == Status::ok) {
        reply.number = reader.i64();
      } else if (reply.status == Status::error) {
        reply.message = reader.str(max_value_bytes);
      } else {
        throw unexpected();
      }
      break;
    case Op::wait:
      if (reply.status == Status::timeout) {
        reply.missing = reader.str_list(max_key_bytes);
      } else if (reply.status != Status::ok) {
        throw unexpected();
      }
      break;
    default:
      throw ProtocolError("a reply to an unknown request");
  }
  reader.expect_end();
  return reply;
}

}  // namespace giant::ccl::store_wire
