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

enum class Algorithm : uint8_t { automatic, ring, halving_doubling };
const char* algorithm_name(Algorithm algorithm);
Algorithm parse_algorithm(const std::string& name);  // throws giant::Error

struct OpOptions {
  int priority = 0;  // larger is more urgent (used by the scheduler of a later issue)
  std::chrono::milliseconds timeout{0};  // 0: the communicator's timeout
};

struct AllreduceOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  Algorithm algorithm = Algorithm::automatic;
};

// input holds size() * count elements; rank r receives block r of the
// reduction (count elements) in output.
struct ReduceScatterOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per rank
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
};

// output holds size() * count elements, rank r's input at block r.
struct AllgatherOptions : OpOptions {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // per rank
  DType dtype = DType::f32;
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
