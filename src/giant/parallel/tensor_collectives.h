// Collectives on tensors, plain and with autograd (Megatron's regions).
//
// Any dtype ccl has. CUDA tensors go to ccl's device backend (NCCL) where
// ccl has one, ordered on libtorch's default stream (the trainer issues its
// work there); without one the blocking calls stage them through host
// memory and the asynchronous ones refuse them. A communicator of size 1
// passes everything through without adding autograd nodes.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/types.h"
#include "giant/ccl/work.h"

namespace giant::parallel {

ccl::DType ccl_dtype(at::ScalarType type);  // Error for types ccl lacks

// Whether ccl reads and writes `tensor`'s memory itself: host memory, or a
// CUDA tensor where ccl has a device backend.
bool ccl_reaches(const at::Tensor& tensor);
// Sets `options` for buffers of `tensor`'s memory (host, or device on the
// default stream); Error when ccl cannot reach it.
void set_memory(ccl::OpOptions& options, const at::Tensor& tensor);

// Blocking, in place, no autograd.
void allreduce_(const at::Tensor& tensor, ccl::Communicator& comm, ccl::ReduceOp op = ccl::ReduceOp::sum);
// Blocking, no autograd: the reduction in a new contiguous tensor (the input
// is left as it is, so no copy is needed to keep it).
at::Tensor allreduce(const at::Tensor& tensor, ccl::Communicator& comm, ccl::ReduceOp op = ccl::ReduceOp::sum);
// Blocking, no autograd: the ranks' tensors concatenated along `dim`.
at::Tensor allgather(const at::Tensor& tensor, ccl::Communicator& comm, int64_t dim);
// Asynchronous in-place allreduce of contiguous memory ccl reaches; the
// tensor must stay alive and untouched until the Work completes.
ccl::Work allreduce_async(const at::Tensor& tensor, ccl::Communicator& comm, ccl::ReduceOp op);
// Asynchronous, in place on a flat contiguous tensor ccl reaches, of
// comm.size() equal blocks, block r being rank r's (ZeRO's shards): reduce_scatter
// leaves the reduction of this rank's block in it (the other blocks keep
// this rank's input); allgather fills every other block with its owner's.
ccl::Work reduce_scatter_blocks_async(const at::Tensor& flat, ccl::Communicator& comm, ccl::ReduceOp op);
ccl::Work allgather_blocks_async(const at::Tensor& flat, ccl::Communicator& comm);

// With autograd. copy_to_region: identity forward, allreduce of the gradient
// backward (a replicated input entering split work). reduce_from_region:
// allreduce forward, identity backward (partial results leaving split work).
// scatter_to_region: this rank's slice of `dim` forward, allgather backward.
// gather_from_region: allgather along `dim` forward, this rank's slice backward.
// `comm_seconds`, when given, accumulates the time spent in the collectives
// (forward and backward); it must outlive the autograd graph.
at::Tensor copy_to_region(const at::Tensor& x, ccl::Communicator& comm, double* comm_seconds = nullptr);
at::Tensor reduce_from_region(const at::Tensor& x, ccl::Communicator& comm, double* comm_seconds = nullptr);
at::Tensor scatter_to_region(const at::Tensor& x, ccl::Communicator& comm, int64_t dim,
                             double* comm_seconds = nullptr);
at::Tensor gather_from_region(const at::Tensor& x, ccl::Communicator& comm, int64_t dim,
                              double* comm_seconds = nullptr);

// This rank's slice of `dim` (which the ranks split evenly).
at::Tensor local_slice(const at::Tensor& x, int rank, int size, int64_t dim);

}  // namespace giant::parallel
