// What a rank reads off its sockets is checked before it is trusted: control
// messages field by field, a data frame's size against what the host can
// hold. The fuzzers (bench/ccl/fuzz_wire.cc) feed these readers mutated
// streams; these are the cases they guard, kept as tests.
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/ccl/control_channel.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/tcp_transport.h"

namespace giant::ccl::detail {
namespace {

constexpr int kSender = 1;
constexpr int kSize = 4;

// The bytes as a closed stream: the reading end of a socket pair.
net::Fd stream_of(const std::string& bytes) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  net::Fd reading(fds[0]), writing(fds[1]);
  net::send_all(writing.get(), bytes.data(), bytes.size(), Deadline::after(std::chrono::seconds(1)));
  return reading;
}

// The CommError reading the stream's first message throws (empty: none).
std::string control_error(const std::string& bytes) {
  net::Fd fd = stream_of(bytes);
  try {
    read_control(fd.get(), kSender, kSize, Deadline::after(std::chrono::seconds(1)));
  } catch (const CommError& e) {
    EXPECT_EQ(e.peer(), kSender) << e.what();
    return e.what();
  }
  return "";
}

// A message with one header field overwritten.
template <class T>
std::string with_field(std::string message, size_t offset, T value) {
  std::memcpy(message.data() + offset, &value, sizeof value);
  return message;
}

TEST(ControlChannel, MessagesReadBackAsSent) {
  ScheduleBody body;
  body.boundary = 2;
  body.round = 1;
  body.run = 7;
  const std::string schedule(reinterpret_cast<const char*>(&body), sizeof body);
  net::Fd fd = stream_of(encode_control(ControlType::abort, 0, 3, FailureKind::timeout, "rank 3 is stuck") +
                         encode_control(ControlType::schedule, 9, -1, FailureKind::comm, schedule));
  const auto deadline = Deadline::after(std::chrono::seconds(1));
  const ControlMessage abort = read_control(fd.get(), kSender, kSize, deadline);
  EXPECT_EQ(abort.header.type, ControlType::abort);
  EXPECT_EQ(abort.header.culprit, 3);
  EXPECT_EQ(abort.header.failure, FailureKind::timeout);
  EXPECT_EQ(abort.reason, "rank 3 is stuck");
  const ControlMessage decided = read_control(fd.get(), kSender, kSize, deadline);
  EXPECT_EQ(decided.header.sequence, 9u);
  EXPECT_EQ(decided.schedule.run, 7u);
}

TEST(ControlChannel, EveryCorruptFieldIsTheSendersError) {
  const std::string abort = encode_control(ControlType::abort, 0, 2, FailureKind::comm, "why");
  const ControlHeader h;
  const size_t culprit = reinterpret_cast<const char*>(&h.culprit) - reinterpret_cast<const char*>(&h);
  const size_t type = reinterpret_cast<const char*>(&h.type) - reinterpret_cast<const char*>(&h);
  const size_t failure = reinterpret_cast<const char*>(&h.failure) - reinterpret_cast<const char*>(&h);
  const size_t body = reinterpret_cast<const char*>(&h.reason_bytes) - reinterpret_cast<const char*>(&h);
  EXPECT_NE(control_error(with_field<int32_t>(abort, culprit, kSize)).find("culprit 4 is no rank"), std::string::npos);
  EXPECT_NE(control_error(with_field<int32_t>(abort, culprit, -2)).find("no rank"), std::string::npos);
  EXPECT_NE(control_error(with_field<uint32_t>(abort, type, 99)).find("unknown type 99"), std::string::npos);
  EXPECT_NE(control_error(with_field<uint32_t>(abort, failure, 7)).find("unknown failure kind"), std::string::npos);
  EXPECT_NE(control_error(with_field<uint32_t>(abort, body, kMaxControlReason + 1)).find("a body of"),
            std::string::npos);
  const std::string ping = encode_control(ControlType::ping, 1, -1, FailureKind::comm, "");
  EXPECT_NE(control_error(with_field<uint32_t>(ping, body, 8)).find("a body of 8 bytes"), std::string::npos);
  EXPECT_NE(control_error(with_field<uint32_t>(ping, 0, 0)).find("no control magic"), std::string::npos);
  EXPECT_NE(control_error(abort.substr(0, abort.size() - 1)).find("broken control connection"), std::string::npos);
}

// A frame for a message not yet received here announces more bytes than
// the host has: the peer is named, nothing is allocated.
TEST(TcpTransport, AFrameLargerThanTheHostIsTheSendersError) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  net::Fd theirs(fds[1]);
  std::vector<std::vector<net::Fd>> sockets(2);
  sockets[kSender].emplace_back(fds[0]);
  TcpTransport transport(0, std::move(sockets), 1 << 16);
  FrameHeader header;
  header.key_hi = 5;
  header.total = static_cast<uint64_t>(physical_memory_bytes()) + 1;
  header.nbytes = 16;
  net::send_all(theirs.get(), &header, sizeof header, Deadline::after(std::chrono::seconds(1)));
  std::string error;
  for (int round = 0; round < 100 && error.empty(); ++round) {
    std::vector<pollfd> polled;
    transport.add_poll_fds(polled);
    ASSERT_GE(::poll(polled.data(), polled.size(), 100), 0);
    try {
      transport.handle(polled.data(), polled.size());
    } catch (const CommError& e) {
      EXPECT_EQ(e.peer(), kSender);
      error = e.what();
    }
  }
  EXPECT_NE(error.find("more than this host can hold"), std::string::npos) << error;
}

}  // namespace
}  // namespace giant::ccl::detail
