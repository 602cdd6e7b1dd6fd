// What travels between ranks (internal): data frames and control messages.
// Ranks of one job share an architecture, so fields are in host byte order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace giant::ccl::detail {

enum class OpKind : uint8_t {
  none = 0, allreduce, reduce_scatter, allgather, allgatherv, alltoall, alltoallv,
  broadcast, reduce, gather, scatter, barrier, send_recv
};
const char* op_kind_name(OpKind kind);

// Says what an operation is, so that ranks that issued different operations
// (another count, dtype, op or root) get a clear error instead of garbage.
struct OpDescriptor {
  OpKind kind = OpKind::none;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t algorithm = 0;  // Algorithm in the low 4 bits, an allreduce's WireDType above (kWireShift)
  int32_t root = -1;
  uint64_t count = 0;
  uint64_t aux = 0;  // e.g. a hash of allgatherv's per-rank counts

  bool operator==(const OpDescriptor& o) const {
    return kind == o.kind && dtype == o.dtype && op == o.op && algorithm == o.algorithm &&
           root == o.root && count == o.count && aux == o.aux;
  }
  bool operator!=(const OpDescriptor& o) const { return !(*this == o); }
  std::string describe() const;
};
constexpr int kWireShift = 4;

// Identifies one message: collectives use (operation sequence number, step);
// point-to-point uses (kP2PBit | tag, per-(peer, tag) sequence number).
struct MessageKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const MessageKey& o) const { return hi == o.hi && lo == o.lo; }
  bool is_p2p() const;
};
constexpr uint64_t kP2PBit = uint64_t{1} << 63;
inline bool MessageKey::is_p2p() const { return (hi & kP2PBit) != 0; }

struct MessageKeyHash {
  size_t operator()(const MessageKey& k) const {
    return std::hash<uint64_t>()(k.hi * 0x9E3779B97F4A7C15ull ^ k.lo);
  }
};

// Throws the CommError for a message whose descriptor (`got`, from `peer`)
// differs from what rank `rank` issued (`expected`), unless they agree.
void check_descriptor(int rank, int peer, const MessageKey& key, const OpDescriptor& got,
                      const OpDescriptor& expected);

constexpr uint32_t kFrameMagic = 0x47434446;    // "GCDF"
constexpr uint32_t kControlMagic = 0x47434343;  // "GCCC"
constexpr uint32_t kHelloMagic = 0x47434848;    // "GCHH"

// Precedes every piece of a message on a data socket. A message may be cut
// into several frames (one per socket) that each carry their offset.
struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t reserved = 0;
  uint64_t key_hi = 0;
  uint64_t key_lo = 0;
  uint64_t offset = 0;  // of this frame's bytes within the message
  uint64_t nbytes = 0;  // bytes following this header
  uint64_t total = 0;   // bytes of the whole message
  OpDescriptor desc;
};
static_assert(sizeof(OpDescriptor) == 24, "descriptor layout");
static_assert(sizeof(FrameHeader) == 72, "frame header layout");

// announce: a rank has issued operation `sequence`, which may overtake the
// work ahead of it (sent to rank 0). schedule: rank 0's decision at a chunk
// boundary of operation `sequence`, a ScheduleBody following the header.
// doorbell: the sender's shared-memory mailbox has news for the receiver.
enum class ControlType : uint32_t {
  ping = 1, pong = 2, goodbye = 3, abort = 4, announce = 5, schedule = 6, doorbell = 7
};

struct ScheduleBody {
  uint64_t boundary = 0;  // which boundary of the running operation
  uint64_t round = 0;     // decisions at one boundary are numbered from 0
  uint64_t run = 0;       // the operation to run there now; 0: go on
};
enum class FailureKind : uint32_t { comm = 1, timeout = 2 };

// Control messages travel on a socket of their own, so an abort or a ping
// never waits behind bulk data.
struct ControlHeader {
  uint32_t magic = kControlMagic;
  ControlType type = ControlType::ping;
  uint64_t sequence = 0;              // ping/pong matching
  int32_t culprit = -1;               // abort: the rank held responsible
  FailureKind failure = FailureKind::comm;
  uint32_t reason_bytes = 0;          // abort: length of the reason that follows
  uint32_t reserved = 0;
};
constexpr uint32_t kMaxControlReason = 16384;

// "rank 3": how errors and messages name a peer.
std::string rank_name(int rank);
// An error adopted from a peer's abort message reads "rank P reports: ...".
std::string peer_report(int peer, const std::string& reason);
bool is_peer_report(const std::string& what);

// First message on every connection: who is calling, for which communicator.
struct Hello {
  uint32_t magic = kHelloMagic;
  int32_t rank = -1;
  int32_t index = -1;  // data socket index, or -1 for the control socket
  uint32_t reserved = 0;
  uint8_t token[16] = {0};  // per-communicator random token from the store
};

}  // namespace giant::ccl::detail
