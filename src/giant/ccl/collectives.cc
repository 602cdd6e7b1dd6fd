// The public collectives: check the call (errors before any work starts,
// the same for every kind of memory), then hand it to the communicator's
// backend for its memory (backend.h).
#include "giant/ccl/collectives.h"

#include <numeric>

#include "giant/base/error.h"
#include "giant/ccl/backend.h"

namespace giant::ccl {

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::automatic: return "automatic";
    case Algorithm::ring: return "ring";
    case Algorithm::halving_doubling: return "halving_doubling";
    case Algorithm::shm: return "shm";
    case Algorithm::hierarchical: return "hierarchical";
  }
  return "unknown";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::automatic, Algorithm::ring, Algorithm::halving_doubling, Algorithm::shm,
                      Algorithm::hierarchical}) {
    if (name == algorithm_name(a)) return a;
  }
  throw Error("unknown algorithm '" + name + "' (use automatic, ring, halving_doubling, shm or hierarchical)");
}

const char* wire_dtype_name(WireDType wire) {
  switch (wire) {
    case WireDType::none: return "none";
    case WireDType::bf16: return "bf16";
    case WireDType::fp16: return "fp16";
  }
  return "unknown";
}

WireDType parse_wire_dtype(const std::string& name) {
  for (WireDType w : {WireDType::none, WireDType::bf16, WireDType::fp16}) {
    if (name == wire_dtype_name(w)) return w;
  }
  throw Error("unknown wire dtype '" + name + "' (use none, bf16 or fp16)");
}


namespace {

void check_memory(const char* what, const OpOptions& o) {
  GIANT_CHECK(o.memory == Memory::host || o.memory == Memory::device, what, ": unknown memory kind ",
              static_cast<int>(o.memory));
  GIANT_CHECK(o.memory == Memory::device || o.stream == nullptr, what,
              ": a stream orders device operations only, but the buffers are in host memory");
}

void check_buffers(const char* what, const OpOptions& o, const void* input, const void* output, size_t count) {
  check_memory(what, o);
  GIANT_CHECK(count == 0 || (input != nullptr && output != nullptr), what, ": input and output must not be null (count ",
              count, ")");
}

void check_op(const char* what, DType dtype, ReduceOp op) {
  dtype_size(dtype);  // throws on an unknown dtype
  GIANT_CHECK(op != ReduceOp::avg || is_floating(dtype), what, ": avg is defined for floating dtypes only, got ",
              dtype_name(dtype), " (use sum and divide)");
}

// A rooted operation: the root is a rank; `root_side` must be non-null on the
// root, `everyone` on every rank.
void check_rooted(const char* what, const Communicator& comm, const OpOptions& o, int root, size_t count,
                  const void* everyone, const char* everyone_name, const void* root_side, const char* root_name) {
  check_memory(what, o);
  GIANT_CHECK(root >= 0 && root < comm.size(), what, ": root ", root, " is not a rank of a communicator of size ",
              comm.size());
  GIANT_CHECK(count == 0 || everyone != nullptr, what, ": ", everyone_name, " must not be null");
  GIANT_CHECK(count == 0 || comm.rank() != root || root_side != nullptr, what, ": the root's ", root_name,
              " must not be null");
}

void check_peer(const char* what, const Communicator& comm, const OpOptions& o, int peer, const void* buffer,
                size_t nbytes) {
  check_memory(what, o);
  GIANT_CHECK(peer >= 0 && peer < comm.size(), what, ": peer ", peer, " is not a rank of a communicator of size ",
              comm.size());
  GIANT_CHECK(peer != comm.rank(), what, ": rank ", peer, " cannot exchange messages with itself");
  GIANT_CHECK(nbytes == 0 || buffer != nullptr, what, ": buffer must not be null (", nbytes, " bytes)");
}

}  // namespace

Work allreduce(Communicator& comm, const AllreduceOptions& o) {
  check_buffers("allreduce", o, o.input, o.output, o.count);
  check_op("allreduce", o.dtype, o.op);
  return comm.backend(o.memory).allreduce(o);
}

Work reduce_scatter(Communicator& comm, const ReduceScatterOptions& o) {
  check_buffers("reduce_scatter", o, o.input, o.output, o.count);
  check_op("reduce_scatter", o.dtype, o.op);
  return comm.backend(o.memory).reduce_scatter(o);
}

Work allgather(Communicator& comm, const AllgatherOptions& o) {
  check_buffers("allgather", o, o.input, o.output, o.count);
  dtype_size(o.dtype);
  return comm.backend(o.memory).allgather(o);
}

Work allgatherv(Communicator& comm, const AllgathervOptions& o) {
  check_memory("allgatherv", o);
  GIANT_CHECK(o.counts.size() == static_cast<size_t>(comm.size()), "allgatherv: counts has ", o.counts.size(),
              " entries, the communicator has ", comm.size(), " ranks");
  size_t total = std::accumulate(o.counts.begin(), o.counts.end(), size_t{0});
  GIANT_CHECK(total == 0 || o.output != nullptr, "allgatherv: output must not be null");
  GIANT_CHECK(o.counts[comm.rank()] == 0 || o.input != nullptr, "allgatherv: input must not be null");
  dtype_size(o.dtype);
  return comm.backend(o.memory).allgatherv(o);
}

Work alltoall(Communicator& comm, const AlltoallOptions& o) {
  check_buffers("alltoall", o, o.input, o.output, o.count);
  dtype_size(o.dtype);
  return comm.backend(o.memory).alltoall(o);
}

Work alltoallv(Communicator& comm, const AlltoallvOptions& o) {
  check_memory("alltoallv", o);
  const size_t n = static_cast<size_t>(comm.size());
  GIANT_CHECK(o.send_counts.size() == n && o.recv_counts.size() == n, "alltoallv: send_counts and recv_counts need ",
              n, " entries, got ", o.send_counts.size(), " and ", o.recv_counts.size());
  dtype_size(o.dtype);
  size_t in_total = std::accumulate(o.send_counts.begin(), o.send_counts.end(), size_t{0});
  size_t out_total = std::accumulate(o.recv_counts.begin(), o.recv_counts.end(), size_t{0});
  GIANT_CHECK(in_total == 0 || o.input != nullptr, "alltoallv: input must not be null");
  GIANT_CHECK(out_total == 0 || o.output != nullptr, "alltoallv: output must not be null");
  GIANT_CHECK(n > 1 || o.send_counts[0] == o.recv_counts[0], "alltoallv: a single rank must receive what it sends (",
              o.send_counts[0], " vs ", o.recv_counts[0], " elements)");
  GIANT_CHECK(o.send_counts[comm.rank()] == o.recv_counts[comm.rank()], "alltoallv: send_counts[", comm.rank(),
              "] must equal recv_counts[", comm.rank(), "] (the block a rank keeps)");
  return comm.backend(o.memory).alltoallv(o);
}

Work broadcast(Communicator& comm, const BroadcastOptions& o) {
  check_rooted("broadcast", comm, o, o.root, o.count, o.output, "output", o.input, "input");
  dtype_size(o.dtype);
  return comm.backend(o.memory).broadcast(o);
}

Work reduce(Communicator& comm, const ReduceOptions& o) {
  check_rooted("reduce", comm, o, o.root, o.count, o.input, "input", o.output, "output");
  check_op("reduce", o.dtype, o.op);
  return comm.backend(o.memory).reduce(o);
}

Work gather(Communicator& comm, const GatherOptions& o) {
  check_rooted("gather", comm, o, o.root, o.count, o.input, "input", o.output, "output");
  dtype_size(o.dtype);
  return comm.backend(o.memory).gather(o);
}

Work scatter(Communicator& comm, const ScatterOptions& o) {
  check_rooted("scatter", comm, o, o.root, o.count, o.output, "output", o.input, "input");
  dtype_size(o.dtype);
  return comm.backend(o.memory).scatter(o);
}

Work barrier(Communicator& comm, const BarrierOptions& o) {
  check_memory("barrier", o);
  return comm.backend(o.memory).barrier(o);
}

Work send(Communicator& comm, const SendOptions& o) {
  check_peer("send", comm, o, o.peer, o.buffer, o.nbytes);
  return comm.backend(o.memory).send(o);
}

Work recv(Communicator& comm, const RecvOptions& o) {
  check_peer("recv", comm, o, o.peer, o.buffer, o.nbytes);
  return comm.backend(o.memory).recv(o);
}

}  // namespace giant::ccl
