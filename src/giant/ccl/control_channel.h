// Control messages on the socket each peer pair keeps for them (internal):
// encoding, and reading with every field checked, so that a corrupt or
// hostile message is a CommError naming its sender, never a culprit or a
// length that the engine would trust.
#pragma once

#include <cstdint>
#include <string>

#include "giant/base/timer.h"
#include "giant/ccl/wire.h"

namespace giant::ccl::detail {

struct ControlMessage {
  ControlHeader header;
  ScheduleBody schedule;  // type schedule
  std::string reason;     // type abort
};

// The bytes of one control message: the header, then `body` (an abort's
// reason, cut at kMaxControlReason, or a schedule's ScheduleBody).
std::string encode_control(ControlType type, uint64_t sequence, int culprit, FailureKind failure,
                           const std::string& body);

// Reads one message that `peer` of a communicator of `size` ranks sent on
// `fd`. CommError naming the peer for a broken connection or a message that
// is not one ccl sends (wrong magic, unknown type or failure kind, a length
// that does not fit its type, a culprit that is no rank).
ControlMessage read_control(int fd, int peer, int size, const Deadline& deadline);

}  // namespace giant::ccl::detail
