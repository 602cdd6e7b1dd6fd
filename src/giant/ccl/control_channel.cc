#include "giant/ccl/control_channel.h"

#include <cstring>

#include "giant/base/error.h"
#include "giant/ccl/socket.h"

namespace giant::ccl::detail {
namespace {

bool known_type(ControlType type) {
  switch (type) {
    case ControlType::ping:
    case ControlType::pong:
    case ControlType::goodbye:
    case ControlType::abort:
    case ControlType::announce:
    case ControlType::schedule:
    case ControlType::doorbell:
      return true;
  }
  return false;
}

// The body length a message of this type carries, or -1: any up to the limit.
int64_t body_bytes(ControlType type) {
  if (type == ControlType::schedule) return sizeof(ScheduleBody);
  if (type == ControlType::abort) return -1;
  return 0;
}

}  // namespace

std::string encode_control(ControlType type, uint64_t sequence, int culprit, FailureKind failure,
                           const std::string& body) {
  ControlHeader h;
  h.type = type;
  h.sequence = sequence;
  h.culprit = culprit;
  h.failure = failure;
  const std::string cut = body.substr(0, kMaxControlReason);
  h.reason_bytes = static_cast<uint32_t>(cut.size());
  std::string message(sizeof h, '\0');
  std::memcpy(message.data(), &h, sizeof h);
  return message + cut;
}

ControlMessage read_control(int fd, int peer, int size, const Deadline& deadline) {
  ControlMessage m;
  ControlHeader& h = m.header;
  try {
    net::recv_all(fd, &h, sizeof h, deadline);
  } catch (const CommError& e) {
    throw CommError(peer, rank_name(peer) + ": broken control connection: " + e.what());
  }
  auto corrupt = [&](const std::string& what) {
    return CommError(peer, "corrupt control message from " + rank_name(peer) + ": " + what);
  };
  if (h.magic != kControlMagic) throw corrupt("no control magic");
  if (!known_type(h.type)) throw corrupt("unknown type " + std::to_string(static_cast<uint32_t>(h.type)));
  if (h.failure != FailureKind::comm && h.failure != FailureKind::timeout) {
    throw corrupt("unknown failure kind " + std::to_string(static_cast<uint32_t>(h.failure)));
  }
  if (h.culprit < -1 || h.culprit >= size) throw corrupt("culprit " + std::to_string(h.culprit) + " is no rank");
  const int64_t expected = body_bytes(h.type);
  if ((expected >= 0 && h.reason_bytes != expected) || h.reason_bytes > kMaxControlReason) {
    throw corrupt("a body of " + std::to_string(h.reason_bytes) + " bytes");
  }
  try {
    if (h.type == ControlType::schedule) {
      net::recv_all(fd, &m.schedule, sizeof m.schedule, deadline);
    } else if (h.reason_bytes > 0) {
      m.reason.resize(h.reason_bytes);
      net::recv_all(fd, m.reason.data(), m.reason.size(), deadline);
    }
  } catch (const CommError& e) {
    throw CommError(peer, rank_name(peer) + ": broken control connection: " + e.what());
  }
  return m;
}

}  // namespace giant::ccl::detail
