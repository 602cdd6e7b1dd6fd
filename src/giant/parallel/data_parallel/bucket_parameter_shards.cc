// ZeRO stages 1 and 2 of GradientReducer: the parameters in flat buffers laid
// out like the gradient buckets, this rank's blocks updated here and gathered
// from their owners everywhere (see gradient_reducer.h).
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/bucket_engines.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

BucketParameterShards::BucketParameterShards(const BucketLayout& layout, std::vector<at::Tensor>& parameters,
                                             ccl::Communicator& comm, const BucketEngine& engine)
    : comm_(comm), buckets_(layout.buckets.size()) {
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketLayout::Bucket& shape = layout.buckets[b];
    // In the parameters' dtype: with bf16 parameters the gather moves half the bytes.
    at::Tensor& buffer = buckets_[b].parameters;
    buffer = bucket_storage(&comm_, shape.elements, shape.parameter_options);
    std::vector<int64_t> offsets, elements;
    for (size_t i : shape.members) {
      at::Tensor& p = parameters[i];
      const int64_t offset = layout.places[i].offset, n = p.numel();
      at::Tensor flat = buffer.narrow(0, offset, n);
      flat.copy_(p.reshape({n}));
      // Every holder of the parameter (its module) sees the new storage.
      p.set_data(flat.view(p.sizes()));
      offsets.push_back(offset);
      elements.push_back(n);
    }
    const int64_t block = shape.block(comm_.size()), mine_begin = comm_.rank() * block;
    const at::Tensor block_gradient = engine.block_gradient(b, comm_.rank());
    for (const BlockStretch& stretch : stretches_in_block(offsets, elements, mine_begin, block)) {
      const int64_t length = stretch.end - stretch.begin;
      UpdatePiece piece;
      piece.tensor = buffer.narrow(0, stretch.begin, length);
      piece.tensor.mutable_grad() = block_gradient.narrow(0, stretch.begin - mine_begin, length);
      piece.parameter = shape.members[stretch.member];
      piece.offset = stretch.begin - offsets[stretch.member];
      piece.whole = false;
      owned_.push_back(std::move(piece));
    }
  }
}

BucketParameterShards::~BucketParameterShards() {
  for (auto& bucket : buckets_) {
    if (!bucket.gathering || bucket.gather.test()) continue;
    // The peers are told; our buffers must outlive the operation.
    comm_.abort("gradient reducer destroyed while a parameter gather was in flight");
    try {
      bucket.gather.wait();
    } catch (...) {
    }
  }
}

void BucketParameterShards::gather_async() {
  if (comm_.size() == 1) return;
  // Buckets hold the parameters in reverse: the last holds the first ones.
  for (size_t b = buckets_.size(); b-- > 0;) {
    Bucket& bucket = buckets_[b];
    GIANT_CHECK(!bucket.gathering, "a parameter gather started while the previous one is in flight");
    bucket.gather = allgather_blocks_async(bucket.parameters, comm_);
    bucket.gathering = true;
  }
}

bool BucketParameterShards::wait_from(size_t first) {
  bool waited = false;
  for (size_t b = buckets_.size(); b-- > first;) {
    Bucket& bucket = buckets_[b];
    if (!bucket.gathering) continue;
    bucket.gathering = false;
    bucket.gather.wait();
    waited = true;
  }
  return waited;
}

int64_t BucketParameterShards::parameter_bytes() const {
  int64_t bytes = 0;
  for (const auto& bucket : buckets_) bytes += bucket.parameters.nbytes();
  return bytes;
}

}  // namespace giant::parallel
