// ZeRO stages 0 and 1 of GradientReducer: whole gradient buckets, reduced
// once the step's last backward completed them (see gradient_reducer.h).
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/bucket_engines.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

AllreduceBuckets::AllreduceBuckets(const BucketLayout& layout, std::vector<at::Tensor>& parameters,
                                   ccl::Communicator* comm, bool scatter, ccl::HostCompressedAllreduce* compressed,
                                   LowRankWire* low_rank)
    : layout_(layout), parameters_(parameters), comm_(comm), scatter_(scatter), compressed_(compressed),
      low_rank_(low_rank),
      buckets_(layout.buckets.size()), views_(parameters.size()), other_dtype_(parameters.size()),
      view_has_step_(parameters.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketLayout::Bucket& shape = layout_.buckets[b];
    buckets_[b].buffer = bucket_storage(comm_, shape.elements, shape.gradient_options);
    for (size_t i : shape.members) {
      at::Tensor& p = parameters_[i];
      views_[i] = buckets_[b].buffer.narrow(0, layout_.places[i].offset, p.numel()).view(p.sizes());
      other_dtype_[i] = views_[i].scalar_type() != p.scalar_type();
      if (!other_dtype_[i]) p.mutable_grad() = views_[i];
    }
  }
}

AllreduceBuckets::~AllreduceBuckets() {
  for (auto& bucket : buckets_) {
    if (!bucket.launched || bucket.work.test()) continue;
    // The peers are told; our buffers must outlive the operation.
    const char* reason = "gradient reducer destroyed while a reduction was in flight";
    comm_->abort(reason);
    if (compressed_ != nullptr) compressed_->abort(reason);
    try {
      bucket.work.wait();
    } catch (...) {
    }
  }
}

void AllreduceBuckets::zero_grad() {
  for (const auto& bucket : buckets_) {
    GIANT_CHECK(!bucket.launched, "zero_grad while a gradient reduction is in flight (call finish first)");
  }
  std::fill(view_has_step_.begin(), view_has_step_.end(), false);
  start_step();
}

void AllreduceBuckets::start_step() {
  for (auto& bucket : buckets_) bucket.ready = 0;
  next_launch_ = 0;
}

void AllreduceBuckets::adopt_gradient(size_t parameter) {
  at::Tensor& grad = parameters_[parameter].mutable_grad();
  const at::Tensor& view = views_[parameter];
  if (grad.is_same(view)) return;  // accumulated in place
  at::NoGradGuard no_grad;
  if (view_has_step_[parameter]) {
    if (grad.defined()) view.add_(grad);  // another dtype's later micro-batch
  } else if (grad.defined()) {
    view.copy_(grad);
  } else {
    view.zero_();
  }
  view_has_step_[parameter] = true;
  // The bucket's own dtype accumulates in place from now on; another dtype
  // comes fresh each micro-batch and is added above.
  if (other_dtype_[parameter]) {
    grad.reset();
  } else {
    grad = view;
  }
}

void AllreduceBuckets::begin_micro_batch(bool last) {
  last_micro_batch_ = last;
  // Buckets already launched (another chunk's, whose last backward came
  // first) stay launched; the others count this backward's arrivals afresh.
  for (size_t b = next_launch_; b < buckets_.size(); ++b) buckets_[b].ready = 0;
}

void AllreduceBuckets::gradient_ready(size_t parameter) {
  const size_t bucket = layout_.places[parameter].bucket;
  GIANT_CHECK(!buckets_[bucket].launched, "the gradient of parameter " + std::to_string(parameter) +
                                              " arrived after its bucket's reduction started (a backward after "
                                              "the one flagged last)");
  adopt_gradient(parameter);
  if (!last_micro_batch_) return;
  if (++buckets_[bucket].ready == layout_.buckets[bucket].members.size()) launch_in_order();
}

void AllreduceBuckets::launch_in_order() {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready >= layout_.buckets[next_launch_].members.size()) {
    const int index = static_cast<int>(next_launch_);
    Bucket& bucket = buckets_[next_launch_++];
    if (low_rank_ != nullptr) {
      // Nothing to start: wait_reductions() averages every matrix at once.
    } else if (compressed_ != nullptr) {
      bucket.work = compressed_->allreduce(bucket.buffer.data_ptr<float>(), bucket.buffer.numel(), index,
                                           ccl::ReduceOp::avg);
    } else if (comm_ != nullptr && comm_->size() > 1) {
      bucket.work = scatter_ ? reduce_scatter_blocks_async(bucket.buffer, *comm_, ccl::ReduceOp::avg)
                             : allreduce_async(bucket.buffer, *comm_, ccl::ReduceOp::avg);
    }
    bucket.launched = true;
  }
}

void AllreduceBuckets::launch_remaining() {
  for (size_t i = 0; i < parameters_.size(); ++i) adopt_gradient(i);
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].ready = layout_.buckets[b].members.size();
  launch_in_order();
}

void AllreduceBuckets::wait_reductions() {
  for (auto& bucket : buckets_) {
    bucket.launched = false;
    bucket.work.wait();
  }
  if (low_rank_ != nullptr) low_rank_->average(views_);
  start_step();
}

at::Tensor AllreduceBuckets::block_gradient(size_t bucket, int rank) const {
  const int64_t block = layout_.buckets[bucket].block(comm_ ? comm_->size() : 1);
  return buckets_[bucket].buffer.narrow(0, rank * block, block);
}

GradientBytes AllreduceBuckets::held_bytes() const {
  GradientBytes bytes;
  for (const auto& bucket : buckets_) bytes.gradients += bucket.buffer.nbytes();
  return bytes;
}

}  // namespace giant::parallel
