#include "giant/ccl/wire.h"

#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/types.h"

namespace giant::ccl::detail {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::none: return "none";
    case OpKind::allreduce: return "allreduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::allgather: return "allgather";
    case OpKind::allgatherv: return "allgatherv";
    case OpKind::alltoall: return "alltoall";
    case OpKind::alltoallv: return "alltoallv";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::barrier: return "barrier";
    case OpKind::send_recv: return "send/recv";
  }
  return "unknown";
}

std::string OpDescriptor::describe() const {
  std::string s = op_kind_name(kind);
  if (kind == OpKind::send_recv) {
    return s + "(nbytes=" + std::to_string(count) + ", tag=" + std::to_string(root) + ")";
  }
  s += "(count=" + std::to_string(count) + ", dtype=" + dtype_name(static_cast<DType>(dtype));
  if (kind == OpKind::allreduce || kind == OpKind::reduce_scatter || kind == OpKind::reduce) {
    s += std::string(", op=") + reduce_op_name(static_cast<ReduceOp>(op));
  }
  if (kind == OpKind::allreduce) {
    s += std::string(", algorithm=") + algorithm_name(static_cast<Algorithm>(algorithm & ((1u << kWireShift) - 1)));
    s += std::string(", wire=") + wire_dtype_name(static_cast<WireDType>(algorithm >> kWireShift));
  }
  if (root >= 0) s += ", root=" + std::to_string(root);
  if (aux != 0) s += ", counts#" + std::to_string(aux % 100000);
  return s + ")";
}

void check_descriptor(int rank, int peer, const MessageKey& key, const OpDescriptor& got,
                      const OpDescriptor& expected) {
  if (got == expected) return;
  const std::string name = "rank " + std::to_string(peer);
  std::string what = key.is_p2p() ? "message with tag " + std::to_string(key.hi & ~kP2PBit)
                                  : "operation #" + std::to_string(key.hi);
  throw CommError(peer, "operation mismatch with " + name + " on " + what + ": rank " + std::to_string(rank) +
                            " issued " + expected.describe() + ", " + name + " issued " + got.describe());
}

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

std::string peer_report(int peer, const std::string& reason) { return rank_name(peer) + " reports: " + reason; }

bool is_peer_report(const std::string& what) { return what.find(" reports: ") != std::string::npos; }

}  // namespace giant::ccl::detail
