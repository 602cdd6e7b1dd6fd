// The NCCL backend's operations: each checks what is its own (host-only
// options), then makes its NCCL calls through enqueue. Operations NCCL has
// no call for (allgatherv, alltoall, alltoallv, gather, scatter) are groups
// of broadcasts or sends and receives.
#include <numeric>

#include "giant/base/error.h"
#include "giant/ccl/nccl_backend.h"
#include "giant/ccl/nccl_support.h"

namespace giant::ccl {
namespace detail {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw Error(std::string(call) + " failed: " + cudaGetErrorString(status));
}

void check_nccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) throw Error(std::string(call) + " failed: " + ncclGetErrorString(result));
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  throw Error("no NCCL type for dtype " + std::to_string(static_cast<int>(dtype)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::prod: return ncclProd;
  }
  throw Error("no NCCL operator for reduce op " + std::to_string(static_cast<int>(op)));
}

}  // namespace detail

namespace {

using detail::nccl_dtype;
using detail::nccl_op;

cudaStream_t stream_of(const OpOptions& options) { return static_cast<cudaStream_t>(options.stream); }

// NCCL picks its own algorithm; ccl's host algorithms and wire types do not apply.
void check_automatic(const char* what, Algorithm algorithm) {
  GIANT_CHECK(algorithm == Algorithm::automatic, what, ": algorithm ", algorithm_name(algorithm),
              " is for host memory; on device memory NCCL chooses (use automatic)");
}

std::vector<size_t> bytes_of(const std::vector<size_t>& counts, DType dtype) {
  std::vector<size_t> bytes;
  for (size_t count : counts) bytes.push_back(count * dtype_size(dtype));
  return bytes;
}

// A device-to-device copy on the stream, unless there is nothing to move.
void copy_device(void* to, const void* from, size_t nbytes, cudaStream_t stream) {
  if (nbytes == 0 || to == from) return;
  detail::check_cuda(cudaMemcpyAsync(to, from, nbytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
}

}  // namespace

ncclResult_t NcclBackend::exchange_blocks(cudaStream_t stream, const char* input, const std::vector<size_t>& send_bytes,
                                          char* output, const std::vector<size_t>& recv_bytes) {
  size_t send_at = 0, recv_at = 0;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) {
      copy_device(output + recv_at, input + send_at, send_bytes[peer], stream);
    } else {
      if (send_bytes[peer] > 0) {
        detail::check_nccl(ncclSend(input + send_at, send_bytes[peer], ncclUint8, peer, comm_, stream), "ncclSend");
      }
      if (recv_bytes[peer] > 0) {
        detail::check_nccl(ncclRecv(output + recv_at, recv_bytes[peer], ncclUint8, peer, comm_, stream), "ncclRecv");
      }
    }
    send_at += send_bytes[peer];
    recv_at += recv_bytes[peer];
  }
  return ncclSuccess;
}

Work NcclBackend::allreduce(const AllreduceOptions& o) {
  check_automatic("allreduce", o.algorithm);
  GIANT_CHECK(o.wire == WireDType::none, "allreduce: wire compression (", wire_dtype_name(o.wire),
              ") is for host memory; NCCL moves device data as it is");
  return enqueue("allreduce", o, stream_of(o), false, [&](cudaStream_t s) {
    return ncclAllReduce(o.input, o.output, o.count, nccl_dtype(o.dtype), nccl_op(o.op), comm_, s);
  });
}

Work NcclBackend::reduce_scatter(const ReduceScatterOptions& o) {
  check_automatic("reduce_scatter", o.algorithm);
  return enqueue("reduce_scatter", o, stream_of(o), false, [&](cudaStream_t s) {
    return ncclReduceScatter(o.input, o.output, o.count, nccl_dtype(o.dtype), nccl_op(o.op), comm_, s);
  });
}

Work NcclBackend::allgather(const AllgatherOptions& o) {
  check_automatic("allgather", o.algorithm);
  return enqueue("allgather", o, stream_of(o), false, [&](cudaStream_t s) {
    return ncclAllGather(o.input, o.output, o.count, nccl_dtype(o.dtype), comm_, s);
  });
}

Work NcclBackend::allgatherv(const AllgathervOptions& o) {
  return enqueue("allgatherv", o, stream_of(o), true, [&](cudaStream_t s) {
    const size_t elem = dtype_size(o.dtype);
    char* out = static_cast<char*>(o.output);
    size_t at = 0;
    for (int root = 0; root < size_; ++root) {
      const void* in = root == rank_ ? o.input : out + at;
      if (o.counts[root] > 0) {
        detail::check_nccl(ncclBroadcast(in, out + at, o.counts[root] * elem, ncclUint8, root, comm_, s),
                           "ncclBroadcast");
      }
      at += o.counts[root] * elem;
    }
    return ncclSuccess;
  });
}

Work NcclBackend::alltoall(const AlltoallOptions& o) {
  const std::vector<size_t> bytes(size_, o.count * dtype_size(o.dtype));
  return enqueue("alltoall", o, stream_of(o), true, [&](cudaStream_t s) {
    return exchange_blocks(s, static_cast<const char*>(o.input), bytes, static_cast<char*>(o.output), bytes);
  });
}

Work NcclBackend::alltoallv(const AlltoallvOptions& o) {
  const auto send_bytes = bytes_of(o.send_counts, o.dtype);
  const auto recv_bytes = bytes_of(o.recv_counts, o.dtype);
  return enqueue("alltoallv", o, stream_of(o), true, [&](cudaStream_t s) {
    return exchange_blocks(s, static_cast<const char*>(o.input), send_bytes, static_cast<char*>(o.output), recv_bytes);
  });
}

Work NcclBackend::broadcast(const BroadcastOptions& o) {
  return enqueue("broadcast", o, stream_of(o), false, [&](cudaStream_t s) {
    return ncclBroadcast(o.input, o.output, o.count, nccl_dtype(o.dtype), o.root, comm_, s);
  });
}

Work NcclBackend::reduce(const ReduceOptions& o) {
  return enqueue("reduce", o, stream_of(o), false, [&](cudaStream_t s) {
    return ncclReduce(o.input, o.output, o.count, nccl_dtype(o.dtype), nccl_op(o.op), o.root, comm_, s);
  });
}

Work NcclBackend::gather(const GatherOptions& o) {
  const size_t block = o.count * dtype_size(o.dtype);
  return enqueue("gather", o, stream_of(o), true, [&](cudaStream_t s) {
    if (block == 0) return ncclSuccess;
    if (rank_ != o.root) return ncclSend(o.input, block, ncclUint8, o.root, comm_, s);
    char* out = static_cast<char*>(o.output);
    for (int peer = 0; peer < size_; ++peer) {
      char* at = out + static_cast<size_t>(peer) * block;
      if (peer == rank_) copy_device(at, o.input, block, s);
      else detail::check_nccl(ncclRecv(at, block, ncclUint8, peer, comm_, s), "ncclRecv");
    }
    return ncclSuccess;
  });
}

Work NcclBackend::scatter(const ScatterOptions& o) {
  const size_t block = o.count * dtype_size(o.dtype);
  return enqueue("scatter", o, stream_of(o), true, [&](cudaStream_t s) {
    if (block == 0) return ncclSuccess;
    if (rank_ != o.root) return ncclRecv(o.output, block, ncclUint8, o.root, comm_, s);
    const char* in = static_cast<const char*>(o.input);
    for (int peer = 0; peer < size_; ++peer) {
      const char* at = in + static_cast<size_t>(peer) * block;
      if (peer == rank_) copy_device(o.output, at, block, s);
      else detail::check_nccl(ncclSend(at, block, ncclUint8, peer, comm_, s), "ncclSend");
    }
    return ncclSuccess;
  });
}

Work NcclBackend::barrier(const BarrierOptions& o) {
  return enqueue("barrier", o, stream_of(o), false, [&](cudaStream_t s) {
    return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, s);
  });
}

Work NcclBackend::send(const SendOptions& o) {
  return enqueue_p2p("send to rank " + std::to_string(o.peer), o, send_stream_, [&](cudaStream_t s) {
    return ncclSend(o.buffer, o.nbytes, ncclUint8, o.peer, comm_, s);
  });
}

Work NcclBackend::recv(const RecvOptions& o) {
  return enqueue_p2p("receive from rank " + std::to_string(o.peer), o, recv_stream_, [&](cudaStream_t s) {
    return ncclRecv(o.buffer, o.nbytes, ncclUint8, o.peer, comm_, s);
  });
}

}  // namespace giant::ccl
