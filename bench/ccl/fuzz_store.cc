// giant_store_fuzz [--iterations N] [--seconds S] [--seed S] [--target NAME]:
// feeds mutated bytes to both ends of the rendezvous store's protocol:
//   requests        the server's parser of a request frame's payload;
//   replies         the client's parser of a reply's payload (the input's
//                   first byte: the request it answers);
//   handshake       a live server's reader of a client's first frame (the
//                   proof of the secret): nothing but the right proof may
//                   be let in;
//   server_session  a live server fed a stream of frames by a client that
//                   authenticated;
//   client_session  a live client's set, get, add and wait answered with a
//                   stream of frames by a server that proved the secret.
// What the parsers accept must encode back to the same bytes. A live
// server must drop a bad client within 5 s and go on serving good ones
// (checked every 64 inputs with a real client); a client must answer a bad
// reply with a giant::Error. Anything else (another exception, a crash, an
// input that hangs) is a failure. The live targets take milliseconds an
// input (a connection, a handshake, the server's 200 ms liveness checks of
// a client blocked in get or wait): at most 50,000 inputs each. Exit
// status: 0 no failure, 1 a failure, 2 bad flags.
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_driver.h"
#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/store.h"
#include "giant/ccl/tcp_store_wire.h"

namespace giant::ccl::fuzz {
namespace {

namespace wire = store_wire;
using giant::fuzz::Inconsistent;
using giant::fuzz::Target;
using giant::fuzz::Verdict;

const std::string kSecret = "giant-store-fuzz";
// What a live exchange may take, in wall time. The server checks a blocked
// client every 200 ms; the rest is room for a loaded machine.
constexpr auto kIo = std::chrono::seconds(5);
// A server collects what the inputs set: a fresh one every so often keeps memory flat.
constexpr int kInputsPerServer = 2000;

std::string frame_of(wire::Writer& writer) {
  const Bytes& bytes = writer.frame();
  return std::string(bytes.begin(), bytes.end());
}

// The frames the other end sends until it closes the connection.
// Inconsistent when it keeps it open past the I/O limit (a server that
// holds on to a client that has finished).
std::vector<Bytes> frames_until_closed(int fd) {
  std::vector<Bytes> frames;
  try {
    while (true) frames.push_back(wire::recv_frame(fd, 1 << 20, Deadline::after(kIo)));
  } catch (const TimeoutError&) {
    throw Inconsistent("the server kept a client that had finished for over 5 s");
  } catch (const CommError&) {
  } catch (const wire::ProtocolError&) {
  }
  return frames;
}

// A real server, replaced every kInputsPerServer inputs, and a check that it
// still serves a well-behaved client.
class ServerUnderTest {
 public:
  int port() {
    if (!server_ || ++inputs_ % kInputsPerServer == 0) {
      server_.reset();
      server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, kSecret);
    }
    return server_->port();
  }
  // Every 64th input: a real client still gets its value back.
  void after_input() {
    if (++checked_ % 64 == 0) check_alive();
  }
  void check_alive() {
    TcpStore client("127.0.0.1", server_->port(), kSecret, kIo);
    client.set("alive", to_bytes("yes"));
    if (to_string(client.get("alive", kIo)) != "yes") throw Inconsistent("the server lost a value");
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  int64_t inputs_ = -1;
  int64_t checked_ = 0;
};

// Connects to the server and, with `authenticate`, proves the secret as a
// client does; without, only takes in the greeting.
net::Fd connect_client(int port, bool authenticate) {
  const Deadline deadline = Deadline::after(kIo);
  net::Fd fd = net::connect_tcp("127.0.0.1", port, deadline);
  if (!authenticate) {
    wire::recv_frame(fd.get(), wire::kMaxHandshakeFrame, deadline);
    return fd;
  }
  try {
    wire::client_handshake(fd.get(), kSecret, "the server under test", deadline);
  } catch (const Error& e) {
    throw Inconsistent(std::string("the server refused the right secret: ") + e.what());
  }
  return fd;
}

// Sends the input after the greeting (authenticate false) or after a good
// handshake, closes the sending side, and returns the server's frames until
// it closes the connection.
std::vector<Bytes> send_to_server(ServerUnderTest& server, const std::string& input, bool authenticate) {
  net::Fd fd = connect_client(server.port(), authenticate);
  try {
    net::send_all(fd.get(), input.data(), input.size(), Deadline::after(kIo));
  } catch (const CommError&) {
    // The server dropped the connection before taking it all in.
  }
  ::shutdown(fd.get(), SHUT_WR);
  std::vector<Bytes> frames = frames_until_closed(fd.get());
  server.after_input();
  return frames;
}

std::vector<std::string> handshake_seeds() {
  wire::Writer proof;
  std::string mac(wire::kMacBytes + wire::kNonceBytes, 'x');
  proof.raw(reinterpret_cast<const uint8_t*>(mac.data()), mac.size());
  wire::Writer empty;
  return {frame_of(proof), frame_of(empty)};
}

std::vector<std::string> request_seeds() {
  using wire::Op;
  wire::Writer set, get, add, wait, get_missing;
  set.u8(static_cast<uint8_t>(Op::set)).str("key").raw(reinterpret_cast<const uint8_t*>("value"), 5);
  get.u8(static_cast<uint8_t>(Op::get)).i64(100).str("key");
  add.u8(static_cast<uint8_t>(Op::add)).i64(3).str("counter");
  wait.u8(static_cast<uint8_t>(Op::wait)).i64(100).u32(2).str("key").str("counter");
  get_missing.u8(static_cast<uint8_t>(Op::get)).i64(0).str("missing");
  return {frame_of(set) + frame_of(get), frame_of(add) + frame_of(add) + frame_of(wait), frame_of(get_missing)};
}

// A frame's payload: what the parsers read.
std::string payload_of(wire::Writer& writer) { return frame_of(writer).substr(4); }

std::string encode_request(const wire::Request& r) {
  using wire::Op;
  wire::Writer w;
  w.u8(static_cast<uint8_t>(r.op));
  switch (r.op) {
    case Op::set: w.str(r.key).raw(r.value.data(), r.value.size()); break;
    case Op::get: w.i64(r.timeout_ms).str(r.key); break;
    case Op::add: w.i64(r.delta).str(r.key); break;
    case Op::wait:
      w.i64(r.timeout_ms).u32(static_cast<uint32_t>(r.keys.size()));
      for (const std::string& k : r.keys) w.str(k);
      break;
  }
  return payload_of(w);
}

std::string encode_reply(wire::Op op, const wire::Reply& r) {
  using wire::Op;
  using wire::Status;
  wire::Writer w;
  w.u8(static_cast<uint8_t>(r.status));
  if (op == Op::get && r.status == Status::ok) w.raw(r.value.data(), r.value.size());
  if (op == Op::add && r.status == Status::ok) w.i64(r.number);
  if (op == Op::add && r.status == Status::error) w.str(r.message);
  if (op == Op::wait && r.status == Status::timeout) {
    w.u32(static_cast<uint32_t>(r.missing.size()));
    for (const std::string& k : r.missing) w.str(k);
  }
  return payload_of(w);
}

const TcpStoreLimits kLimits;

Verdict feed_request(const std::string& input) {
  wire::Request request;
  try {
    request = wire::parse_request(Bytes(input.begin(), input.end()), kLimits.max_key_bytes, kLimits.max_value_bytes);
  } catch (const wire::ProtocolError&) {
    return Verdict::refused;
  }
  if (encode_request(request) != input) throw Inconsistent("the request does not encode back to its bytes");
  return Verdict::accepted;
}

// The input's first byte is the request the rest answers.
Verdict feed_reply(const std::string& input) {
  if (input.empty()) return Verdict::refused;
  const auto op = static_cast<wire::Op>(input[0]);
  const std::string payload = input.substr(1);
  wire::Reply reply;
  try {
    reply = wire::parse_reply(op, Bytes(payload.begin(), payload.end()), kLimits.max_key_bytes,
                              kLimits.max_value_bytes);
  } catch (const wire::ProtocolError&) {
    return Verdict::refused;
  }
  if (encode_reply(op, reply) != payload) throw Inconsistent("the reply does not encode back to its bytes");
  return Verdict::accepted;
}

std::vector<std::string> request_payload_seeds() {
  std::vector<std::string> seeds;
  for (const std::string& frames : request_seeds()) {
    // Each seed stream's frames, one by one.
    for (size_t at = 0; at + 4 <= frames.size();) {
      uint32_t length = 0;
      std::memcpy(&length, frames.data() + at, 4);
      seeds.push_back(frames.substr(at + 4, length));
      at += 4 + length;
    }
  }
  return seeds;
}

std::vector<std::string> reply_payload_seeds() {
  using wire::Op;
  using wire::Status;
  wire::Writer ok, value, counter, refused, timeout, get_timeout;
  ok.u8(static_cast<uint8_t>(Status::ok));
  value.u8(static_cast<uint8_t>(Status::ok)).raw(reinterpret_cast<const uint8_t*>("value"), 5);
  counter.u8(static_cast<uint8_t>(Status::ok)).i64(41);
  refused.u8(static_cast<uint8_t>(Status::error)).str("'k' holds no integer");
  timeout.u8(static_cast<uint8_t>(Status::timeout)).u32(2).str("a").str("b");
  get_timeout.u8(static_cast<uint8_t>(Status::timeout));
  auto answering = [](Op op, wire::Writer& w) { return std::string(1, static_cast<char>(op)) + payload_of(w); };
  return {answering(Op::set, ok),       answering(Op::get, value),  answering(Op::get, get_timeout),
          answering(Op::add, counter),  answering(Op::add, refused), answering(Op::wait, ok),
          answering(Op::wait, timeout)};
}

// A listening socket whose one connection is answered with the input as the
// replies, after an honest handshake.
class FakeServer {
 public:
  FakeServer() : listener_(net::listen_tcp("127.0.0.1", 0, &port_)) {}
  int port() const { return port_; }
  // Accepts one client on a thread of its own: the handshake, then the
  // input while the client's requests are drained, then a close.
  std::thread answer_with(const std::string& input) {
    return std::thread([this, input] {
      try {
        net::Fd fd = net::accept_tcp(listener_.get(), Deadline::after(kIo));
        wire::serve_handshake(fd.get(), kSecret, Deadline::after(kIo));
        net::send_all(fd.get(), input.data(), input.size(), Deadline::after(kIo));
        ::shutdown(fd.get(), SHUT_WR);
        char sink[4096];
        while (::recv(fd.get(), sink, sizeof sink, 0) > 0) {
        }
      } catch (const std::exception&) {
        // The client gave up first: its side of the story is what is judged.
      }
    });
  }

 private:
  int port_ = 0;
  net::Fd listener_;
};

std::vector<std::string> reply_seeds() {
  using wire::Status;
  wire::Writer ok, value, counter, waited, timeout;
  ok.u8(static_cast<uint8_t>(Status::ok));
  value.u8(static_cast<uint8_t>(Status::ok)).raw(reinterpret_cast<const uint8_t*>("v"), 1);
  counter.u8(static_cast<uint8_t>(Status::ok)).i64(1);
  waited.u8(static_cast<uint8_t>(Status::ok));
  timeout.u8(static_cast<uint8_t>(Status::timeout)).u32(1).str("b");
  return {frame_of(ok) + frame_of(value) + frame_of(counter) + frame_of(waited),
          frame_of(ok) + frame_of(value) + frame_of(counter) + frame_of(timeout)};
}

// A client's set, get, add and wait against replies made of the input.
Verdict feed_replies(FakeServer& server, const std::string& input) {
  std::thread answering = server.answer_with(input);
  Verdict verdict = Verdict::accepted;
  try {
    TcpStore client("127.0.0.1", server.port(), kSecret, kIo);
    client.set("k", to_bytes("v"));
    client.get("k", std::chrono::milliseconds(100));
    client.add("n", 1);
    client.wait({"a", "b"}, std::chrono::milliseconds(100));
  } catch (const Error&) {
    verdict = Verdict::refused;  // giant::Error and its CommError, TimeoutError: the expected answers
  } catch (...) {
    answering.join();
    throw;
  }
  answering.join();
  return verdict;
}

std::vector<Target> targets() {
  set_log_level(LogLevel::error);  // the server's warning for each client it drops is the expected answer
  auto server = std::make_shared<ServerUnderTest>();
  Target handshake{"handshake", handshake_seeds(), [server](const std::string& input) {
                     const std::vector<Bytes> frames = send_to_server(*server, input, false);
                     // Status 1 opens the connection: only the secret's proof may get it.
                     if (!frames.empty() && !frames[0].empty() && frames[0][0] != 0) {
                       throw Inconsistent("the server let in a client without the secret");
                     }
                     return Verdict::refused;
                   }};
  Target server_session{"server_session", request_seeds(), [server](const std::string& input) {
                          return send_to_server(*server, input, true).empty() ? Verdict::refused
                                                                              : Verdict::accepted;
                        }};
  auto fake = std::make_shared<FakeServer>();
  Target client_session{"client_session", reply_seeds(),
                        [fake](const std::string& input) { return feed_replies(*fake, input); }};
  handshake.max_iterations = server_session.max_iterations = client_session.max_iterations = 50000;
  return {Target("requests", request_payload_seeds(), feed_request),
          Target("replies", reply_payload_seeds(), feed_reply), handshake, server_session, client_session};
}

}  // namespace
}  // namespace giant::ccl::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv,
                                "Fuzzes the rendezvous store's protocol: the server's handshake and requests, the "
                                "client's replies.",
                                "giant_store_fuzz", giant::ccl::fuzz::targets);
}
