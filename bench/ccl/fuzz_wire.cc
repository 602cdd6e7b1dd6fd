// giant_wire_fuzz [--iterations N] [--seconds S] [--seed S] [--target NAME]:
// feeds mutated byte streams to what reads ccl's wire, as a peer rank
// would send them over a socket:
//   data_frames  the TCP transport's data socket (frame headers, stripes,
//                messages that arrive before their receive is posted),
//                with a collective's and a point-to-point receive posted;
//   control      the control socket's messages (pings, aborts with their
//                culprit and reason, schedules).
// Each stream must end in a CommError naming the sending rank, or be taken
// in whole with every posted receive complete; anything else (another
// exception, a crash, an input that hangs) is a failure. Exit status: 0 no
// failure, 1 a failure, 2 bad flags.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_driver.h"
#include "giant/base/error.h"
#include "giant/ccl/control_channel.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/tcp_transport.h"
#include "giant/ccl/wire.h"

namespace giant::ccl::fuzz {
namespace {

using detail::ControlType;
using detail::FailureKind;
using detail::FrameHeader;
using detail::MessageKey;
using detail::OpDescriptor;
using detail::OpKind;
using detail::Request;
using giant::fuzz::Inconsistent;
using giant::fuzz::Target;
using giant::fuzz::Verdict;

constexpr int kPeer = 1;
constexpr size_t kCollectiveBytes = 256;
constexpr size_t kP2PBytes = 100;
constexpr uint64_t kP2PTag = 7;

OpDescriptor collective_desc() {
  OpDescriptor d;
  d.kind = OpKind::allreduce;
  d.dtype = 1;
  d.count = kCollectiveBytes / 4;
  return d;
}

OpDescriptor p2p_desc() {
  OpDescriptor d;
  d.kind = OpKind::send_recv;
  d.count = kP2PBytes;
  return d;
}

const MessageKey kCollectiveKey{1, 0};
const MessageKey kP2PKey{detail::kP2PBit | kP2PTag, 0};

// One frame as a peer's transport writes it.
std::string frame(const MessageKey& key, const OpDescriptor& desc, uint64_t offset, uint64_t nbytes,
                  uint64_t total) {
  FrameHeader h;
  h.key_hi = key.hi;
  h.key_lo = key.lo;
  h.offset = offset;
  h.nbytes = nbytes;
  h.total = total;
  h.desc = desc;
  std::string bytes(sizeof h, '\0');
  std::memcpy(bytes.data(), &h, sizeof h);
  for (uint64_t i = 0; i < nbytes; ++i) bytes += static_cast<char>('a' + (offset + i) % 26);
  return bytes;
}

std::vector<std::string> data_frame_seeds() {
  const OpDescriptor c = collective_desc(), p = p2p_desc();
  const MessageKey early{2, 0};  // an operation not yet issued here: stashed
  return {frame(kCollectiveKey, c, 0, kCollectiveBytes, kCollectiveBytes),
          frame(kCollectiveKey, c, 0, 128, kCollectiveBytes) + frame(kCollectiveKey, c, 128, 128, kCollectiveBytes),
          frame(kP2PKey, p, 0, kP2PBytes, kP2PBytes) + frame(kCollectiveKey, c, 0, kCollectiveBytes, kCollectiveBytes),
          frame(early, c, 0, 64, kCollectiveBytes) + frame(kCollectiveKey, c, 0, kCollectiveBytes, kCollectiveBytes) +
              frame(early, c, 64, 192, kCollectiveBytes),
          frame(kCollectiveKey, c, 0, 0, 0),
          ""};
}

// Both ends of a socket pair, as descriptors that close themselves.
std::pair<net::Fd, net::Fd> socket_pair() {
  int fds[2];
  GIANT_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair failed");
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

// Sends a stream on a thread of its own, so that one longer than the
// socket's buffer is read while it is written, then closes its end. A
// reader that stops early closes its own end: the send then fails at once.
class StreamWriter {
 public:
  StreamWriter(net::Fd fd, const std::string& bytes)
      : thread_([fd = std::move(fd), &bytes]() mutable {
          try {
            net::send_all(fd.get(), bytes.data(), bytes.size(), Deadline::after(std::chrono::seconds(5)));
          } catch (const CommError&) {
            // The reader stopped first.
          }
        }) {}
  ~StreamWriter() { thread_.join(); }
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

 private:
  std::thread thread_;
};

// Polls the transport until it throws or every socket is closed. False when
// it neither did within the round limit (a transport that spins).
bool pump(detail::TcpTransport& transport) {
  for (int round = 0; round < 100000; ++round) {
    std::vector<pollfd> fds;
    transport.add_poll_fds(fds);
    bool any_open = false;
    for (const pollfd& p : fds) any_open = any_open || p.fd >= 0;
    if (!any_open) return true;
    if (::poll(fds.data(), fds.size(), 100) < 0) continue;
    transport.handle(fds.data(), fds.size());
  }
  return false;
}

// Resets the transport when it goes out of scope: declared after the
// writer, it closes the reading sockets before the writer is joined.
struct ClosesFirst {
  std::optional<detail::TcpTransport>& transport;
  ~ClosesFirst() { transport.reset(); }
};

// The input as one data socket's stream from rank 1 (its other socket
// closed at once), into rank 0's transport with two receives posted.
Verdict feed_data_frames(const std::string& input) {
  auto [mine0, theirs0] = socket_pair();
  auto [mine1, theirs1] = socket_pair();
  std::vector<std::vector<net::Fd>> sockets(2);
  sockets[kPeer].push_back(std::move(mine0));
  sockets[kPeer].push_back(std::move(mine1));
  theirs1.reset();
  std::vector<char> collective(kCollectiveBytes), p2p(kP2PBytes);
  Request collective_recv{Request::Kind::recv, kPeer, kCollectiveKey, collective.data(), collective.size(),
                          collective_desc()};
  Request p2p_recv{Request::Kind::recv, kPeer, kP2PKey, p2p.data(), p2p.size(), p2p_desc()};
  std::optional<detail::TcpTransport> transport;
  transport.emplace(0, std::move(sockets), 64 << 10);
  transport->begin_collective(1, collective_desc());
  transport->post_recv(&collective_recv);
  transport->post_recv(&p2p_recv);
  StreamWriter writer(std::move(theirs0), input);
  ClosesFirst closes_first{transport};
  try {
    if (!pump(*transport)) throw Inconsistent("the transport neither finished nor failed");
  } catch (const CommError& e) {
    if (e.peer() != kPeer) throw Inconsistent("a CommError naming rank " + std::to_string(e.peer()) + ": " + e.what());
    transport->drop_all();
    return Verdict::refused;
  }
  // Closed with nothing thrown: only when nothing it waited for is missing.
  if (!collective_recv.complete || !p2p_recv.complete) {
    throw Inconsistent("the peer closed with a posted receive incomplete and no error");
  }
  return Verdict::accepted;
}

std::vector<std::string> control_seeds() {
  detail::ScheduleBody body;
  body.boundary = 3;
  body.round = 1;
  body.run = 9;
  const std::string schedule(reinterpret_cast<const char*>(&body), sizeof body);
  using detail::encode_control;
  return {encode_control(ControlType::ping, 1, -1, FailureKind::comm, ""),
          encode_control(ControlType::pong, 1, -1, FailureKind::comm, "") +
              encode_control(ControlType::announce, 5, -1, FailureKind::comm, ""),
          encode_control(ControlType::abort, 0, 2, FailureKind::timeout, "rank 2 does not respond"),
          encode_control(ControlType::schedule, 4, -1, FailureKind::comm, schedule) +
              encode_control(ControlType::goodbye, 0, -1, FailureKind::comm, ""),
          encode_control(ControlType::doorbell, 0, -1, FailureKind::comm, "")};
}

// The input as rank 1's control stream in a communicator of 4 ranks: read
// message by message until the closed end.
Verdict feed_control(const std::string& input) {
  constexpr int kSize = 4;
  auto [mine, theirs] = socket_pair();
  StreamWriter writer(std::move(theirs), input);
  int messages = 0;
  // Stops reading at the first error: closing this end ends the writer's send.
  struct Closes {
    net::Fd& fd;
    ~Closes() { fd.reset(); }
  } closes{mine};
  try {
    while (true) {
      const detail::ControlMessage m =
          detail::read_control(mine.get(), kPeer, kSize, Deadline::after(std::chrono::seconds(1)));
      if (m.header.culprit < -1 || m.header.culprit >= kSize) throw Inconsistent("a culprit that is no rank");
      if (m.reason.size() > detail::kMaxControlReason) throw Inconsistent("a reason over the limit");
      ++messages;
    }
  } catch (const CommError& e) {
    if (e.peer() != kPeer) throw Inconsistent("a CommError naming rank " + std::to_string(e.peer()));
  }
  return messages > 0 ? Verdict::accepted : Verdict::refused;
}

std::vector<Target> targets() {
  Target data{"data_frames", data_frame_seeds(), feed_data_frames};
  Target control{"control", control_seeds(), feed_control};
  return {data, control};
}

}  // namespace
}  // namespace giant::ccl::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv, "Fuzzes what reads ccl's wire: data frames and control messages.",
                                "giant_wire_fuzz", giant::ccl::fuzz::targets);
}
