// ccl's collectives: one options struct and one free function each, all
// asynchronous. Buffers must stay alive and untouched until the returned
// Work completes. `count` is in elements, `nbytes` in bytes. Passing the
// same pointer as input and output runs in place.
//
// Results of allreduce, reduce_scatter and allgather are bitwise identical
// on every rank. avg is defined for floating dtypes only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "giant/ccl/communicator.h"
#include "giant/ccl/types.h"
#include "giant/ccl/work.h"

namespace giant::ccl {

// How a collective moves its data. automatic asks the communicator's cost
// model (alpha-beta per link kind); any other choice overrides it per call.
//   ring              ring over every rank (tcp, or shm between ranks of a host)
//   halving_doubling  recursive halving and doubling (allreduce only)
//   shm               directly in shared memory; every rank on one host
//   hierarchical      shm inside each host, one ring per local rank across hosts
enum class Algorithm : uint8_t { automatic, ring, halving_doubling, shm, hierarchical };
const char* algorithm_name(Algorithm algorithm);
Algorithm parse_algorithm(const std::string& name);  // throws giant::Error

// The type floating data travels in between hosts (opt-in per call). Each
// result is still bitwise identical on every rank: the owner of a block
// rounds its own copy as well. Error is that of one rounding per hop of the
// reduction (bf16: 8 significant bits, fp16: 11).
enum class WireDType : uint8_t { none, bf16, fp16 };
const char* wire_dtype_name(WireDType wire);
WireDType parse_wire_dtype(const std::string& name);  // throws giant::Error

struct OpOptions {
  // The buffers' memory: host, or device (the communicator's device backend,
  // made on the first device operation: see backend.h).
  Memory memory = Memory::host;
  // Device memory only: the stream (a cudaStream_t) the operation is ordered
  // on, as libtorch's current stream; null: the default stream.
  void* stream = nullptr;
  int priority = 0;  // larger is more urgent
  std::chrono::milliseconds timeout{0};  // 0: the communicator's timeout
  // Pipeline segment of ring and chain algorithms; 0: ccl.segment_bytes, or
  // the model's choice for this call. Every rank must pass the same.
  size_t segment_bytes = 0;
};

struct AllreduceOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  Algorithm algorithm = Algorithm::automatic;
  WireDType wire = WireDType::none;  // f32 data only; ring or hierarchical
};

// input holds size() * count elements; rank r receives block r of the
// reduction (count elements) in output.
struct ReduceScatterOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per rank
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  Algorithm algorithm = Algorithm::automatic;  // ring, shm or hierarchical
};

// output holds size() * count elements, rank r's input at block r.
struct AllgatherOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per rank
  DType dtype = DType::f32;
  Algorithm algorithm = Algorithm::automatic;  // ring, shm or hierarchical
};

// Rank r contributes counts[r] elements; output holds their concatenation.
struct AllgathervOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<size_t> counts;
  DType dtype = DType::f32;
};

// Block j of input (count elements) goes to rank j; block i of output comes
// from rank i.
struct AlltoallOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per peer
  DType dtype = DType::f32;
};

// Blocks laid out contiguously in rank order with the given sizes; the
// receiver's recv_counts[i] must equal rank i's send_counts[receiver].
struct AlltoallvOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<size_t> send_counts;
  std::vector<size_t> recv_counts;
  DType dtype = DType::f32;
};

// input is read on the root only; every rank (root included) gets output.
struct BroadcastOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  int root = 0;
};

// output is written on the root only.
struct ReduceOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
};

// The root's output holds size() * count elements, rank i's at block i.
struct GatherOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per rank
  DType dtype = DType::f32;
  int root = 0;
};

// The root's input holds size() * count elements; rank i gets block i.
struct ScatterOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per rank
  DType dtype = DType::f32;
  int root = 0;
};

struct BarrierOptions : OpOptions {};

// Point to point. Messages between a pair with the same tag arrive in the
// order they were sent; different tags are independent, so receives may be
// issued in any order. Sizes must match exactly.
struct SendOptions : OpOptions {
  const void* buffer = nullptr;
  size_t nbytes = 0;
  int peer = 0;
  uint32_t tag = 0;
};

struct RecvOptions : OpOptions {
  void* buffer = nullptr;
  size_t nbytes = 0;
  int peer = 0;
  uint32_t tag = 0;
};

// What Algorithm::automatic resolves to for an allreduce of `nbytes` on comm
// (the same on every rank of it).
Algorithm choose_allreduce_algorithm(const Communicator& comm, size_t nbytes);

Work allreduce(Communicator& comm, const AllreduceOptions& options);
Work reduce_scatter(Communicator& comm, const ReduceScatterOptions& options);
Work allgather(Communicator& comm, const AllgatherOptions& options);
Work allgatherv(Communicator& comm, const AllgathervOptions& options);
Work alltoall(Communicator& comm, const AlltoallOptions& options);
Work alltoallv(Communicator& comm, const AlltoallvOptions& options);
Work broadcast(Communicator& comm, const BroadcastOptions& options);
Work reduce(Communicator& comm, const ReduceOptions& options);
Work gather(Communicator& comm, const GatherOptions& options);
Work scatter(Communicator& comm, const ScatterOptions& options);
Work barrier(Communicator& comm, const BarrierOptions& options = {});
Work send(Communicator& comm, const SendOptions& options);
Work recv(Communicator& comm, const RecvOptions& options);

}  // namespace giant::ccl
