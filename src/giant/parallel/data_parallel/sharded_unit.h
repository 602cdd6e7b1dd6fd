// One ZeRO-3 unit (ShardedParameters' building block): a layer's
// parameters (or one tied weight) as one flat buffer of dp equal blocks.
//
// The parameters become views of the buffer's storage once; the storage's
// memory is then freed and allocated again in place (as FSDP resizes its
// flat parameter's storage to zero), so every tensor sharing it (the
// parameters, the views of them autograd saved for backward) sees the data
// of the latest gather. Between uses only this rank's block is kept, in
// `owned` (what the optimizer updates), with its gradient shard.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/ccl/communicator.h"
#include "giant/ccl/work.h"

namespace giant::parallel {

class ShardedUnit {
 public:
  enum class Residency { freed, gathering, gathered };

  // Moves `parameters` (their current values) into the unit; frees the
  // whole buffer, keeping this rank's block. grad_dtype: the shard's.
  ShardedUnit(std::vector<at::Tensor> parameters, std::vector<size_t> indices, int rank, int ranks,
              at::ScalarType grad_dtype);

  // Allocates the buffer, copies the owned block in and starts the
  // allgather on `comm` (no-op unless freed).
  void start_gather(ccl::Communicator& comm);
  // Waits for a gather in flight (starting one when freed). True when it waited.
  bool wait_gathered(ccl::Communicator& comm);
  // Frees the whole buffer (waiting for a gather in flight first).
  void release();
  Residency residency() const { return residency_; }

  const std::vector<size_t>& indices() const { return indices_; }  // the parameters' numbers
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  const at::Tensor& owned() const { return owned_; }
  const at::Tensor& grad_shard() const { return grad_shard_; }
  // Where parameter k of the unit starts in the flat buffer.
  int64_t offset(size_t k) const { return offsets_.at(k); }
  int64_t elements() const { return elements_; }  // padded to dp blocks
  int64_t block() const { return block_; }
  int64_t whole_bytes() const;
  int64_t owned_bytes() const;
  int64_t grad_bytes() const;  // the shard's (a flat gradient is ranks times this)
  at::ScalarType grad_dtype() const { return grad_shard_.scalar_type(); }
  int rank() const { return rank_; }

 private:
  void allocate();

  std::vector<at::Tensor> parameters_;
  std::vector<size_t> indices_;
  std::vector<int64_t> offsets_;
  int rank_;
  int64_t elements_ = 0, block_ = 0;
  at::Tensor flat_;  // over the shared storage; no autograd, a version counter of its own
  at::Tensor owned_;
  at::Tensor grad_shard_;
  ccl::Work gather_;
  Residency residency_ = Residency::gathered;
};

}  // namespace giant::parallel
