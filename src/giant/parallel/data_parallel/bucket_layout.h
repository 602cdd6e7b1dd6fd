// Where a GradientReducer keeps each gradient: the parameters assigned to a
// few contiguous buckets, each reduced as one message, and each parameter's
// place in its bucket. Every ZeRO stage's engine (bucket_engines.h) works on
// the same layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "giant/ccl/communicator.h"

namespace giant::parallel {

struct BucketLayout {
  struct Bucket {
    std::vector<size_t> members;  // its parameters, in the order backward produces them
    int64_t content = 0;          // the members' elements
    int64_t elements = 0;         // content padded to equal blocks, one per rank, when sharded
    at::TensorOptions gradient_options;   // the bucket's gradient dtype
    at::TensorOptions parameter_options;  // the members' own dtype (no autograd)
    int64_t block(int ranks) const { return elements / ranks; }
  };
  struct Place {
    size_t bucket = 0;
    int64_t offset = 0;  // where the parameter starts in its bucket (elements)
  };
  std::vector<Bucket> buckets;
  std::vector<Place> places;  // one per parameter
  int64_t largest = 0;        // the elements of the largest bucket
};

// Parameters are bucketed in reverse order (the order backward produces
// their gradients), each bucket up to bucket_bytes (at least one parameter)
// of one dtype and device. grad_dtype: the buckets' (default: each
// parameter's own). `alone`: parameters that get a bucket of their own.
// With `blocks` > 1 each bucket is padded to that many equal blocks.
BucketLayout lay_out_buckets(const std::vector<at::Tensor>& parameters, int64_t bucket_bytes,
                             c10::optional<at::ScalarType> grad_dtype, const std::vector<size_t>& alone, int blocks);

// A zeroed flat buffer. With a communicator and on the host, a buffer shared
// with the ranks (collective over comm): reductions then read the peers'
// buffers in place instead of copying each through shared memory.
at::Tensor bucket_storage(ccl::Communicator* comm, int64_t elements, const at::TensorOptions& options);

}  // namespace giant::parallel
