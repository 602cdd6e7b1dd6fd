// ZeRO stage 2 of GradientReducer: each micro-batch's gradients reduced in
// rounds through pooled staging buffers into persistent gradient shards
// (see gradient_reducer.h).
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/bucket_engines.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

ReduceScatterRounds::ReduceScatterRounds(const BucketLayout& layout, std::vector<at::Tensor>& parameters,
                                         ccl::Communicator& comm, ccl::HostCompressedAllreduce* compressed)
    : layout_(layout), parameters_(parameters), comm_(comm), compressed_(compressed), buckets_(layout.buckets.size()),
      in_round_(parameters.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketLayout::Bucket& shape = layout_.buckets[b];
    buckets_[b].shard_grad = torch::zeros({shape.block(comm_.size())}, shape.gradient_options);
    staging_options_ = shape.gradient_options;
  }
  constexpr int kStagingBuffers = 3;  // rounds being filled, launched and folded at once
  for (int k = 0; k < kStagingBuffers; ++k) {
    staging_slots_.push_back(bucket_storage(&comm_, layout_.largest, staging_options_));
    slot_state_.push_back(SlotState::free);
    ++staging_buffers_;
  }
}

ReduceScatterRounds::~ReduceScatterRounds() {
  for (auto& round : in_flight_) {
    if (round.work.test()) continue;
    // The peers are told; our buffers must outlive the operation.
    const char* reason = "gradient reducer destroyed while a gradient round was in flight";
    comm_.abort(reason);
    if (compressed_ != nullptr) compressed_->abort(reason);
    try {
      round.work.wait();
    } catch (...) {
    }
  }
}

void ReduceScatterRounds::zero_grad() {
  for (auto& bucket : buckets_) bucket.shard_has_step = false;
  GIANT_CHECK(in_flight_.empty(), "zero_grad while a gradient round is in flight (call finish first)");
}

// Rounds are launched in a fixed cyclic bucket order from the first bucket
// of each micro-batch.
void ReduceScatterRounds::begin_micro_batch(bool) { next_launch_ = 0; }

at::Tensor ReduceScatterRounds::block_gradient(size_t bucket, int rank) const {
  GIANT_CHECK(rank == comm_.rank(), "ZeRO stage 2 keeps only this rank's gradient blocks");
  return buckets_[bucket].shard_grad;
}

GradientBytes ReduceScatterRounds::held_bytes() const {
  GradientBytes bytes;
  for (const auto& bucket : buckets_) bytes.gradients += bucket.shard_grad.nbytes();
  bytes.comm_buffers =
      staging_buffers_ * layout_.largest * static_cast<int64_t>(c10::elementSize(staging_options_.dtype().toScalarType()));
  return bytes;
}

// A staging buffer (as long as the largest bucket: any bucket's round is its
// first elements) whose padding after the bucket's last parameter is zero.
// Rounds take the shared slots in turn, the same on every rank: a shared
// buffer names itself in the collective, so peers must agree on it. A slot
// whose round is in flight is waited for; one held by a round not launched
// yet is passed over for a private buffer (the same decision on every
// rank: launches follow the same order everywhere).
at::Tensor ReduceScatterRounds::acquire_staging(size_t bucket) {
  fold_in_flight(/*wait=*/false);  // rounds already reduced give their buffers back
  const size_t slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % staging_slots_.size();
  at::Tensor staging;
  if (slot_state_[slot] == SlotState::unlaunched) {
    if (private_pool_.empty()) {
      staging = torch::empty({layout_.largest}, staging_options_);
      ++staging_buffers_;
    } else {
      staging = std::move(private_pool_.back());
      private_pool_.pop_back();
    }
  } else {
    while (slot_state_[slot] == SlotState::in_flight) fold_oldest_round();
    staging = staging_slots_[slot];
    slot_state_[slot] = SlotState::unlaunched;
  }
  const BucketLayout::Bucket& b = layout_.buckets[bucket];
  if (b.content < b.elements) staging.narrow(0, b.content, b.elements - b.content).zero_();
  return staging;
}

int ReduceScatterRounds::slot_of(const at::Tensor& staging) const {
  for (size_t k = 0; k < staging_slots_.size(); ++k) {
    if (staging_slots_[k].data_ptr() == staging.data_ptr()) return static_cast<int>(k);
  }
  return -1;
}

void ReduceScatterRounds::gradient_ready(size_t parameter) {
  at::Tensor& grad = parameters_[parameter].mutable_grad();
  if (!grad.defined()) return;
  const size_t b = layout_.places[parameter].bucket;
  Bucket& bucket = buckets_[b];
  if (!bucket.filling.defined()) {
    bucket.filling = acquire_staging(b);
    bucket.filling_ready = 0;
  }
  at::NoGradGuard no_grad;
  at::Tensor view = bucket.filling.narrow(0, layout_.places[parameter].offset, grad.numel());
  if (in_round_[parameter]) {
    view.add_(grad.reshape({-1}));  // a second gradient before the round was complete
  } else {
    view.copy_(grad.reshape({-1}));
    in_round_[parameter] = true;
    ++bucket.filling_ready;
  }
  grad.reset();
  if (bucket.filling_ready == layout_.buckets[b].members.size()) {
    complete_round(b);
    launch_rounds_in_order(/*flush=*/false);
  }
}

void ReduceScatterRounds::complete_round(size_t b) {
  Bucket& bucket = buckets_[b];
  for (size_t i : layout_.buckets[b].members) {
    if (!in_round_[i]) {  // finish(): no gradient came this round
      bucket.filling.narrow(0, layout_.places[i].offset, parameters_[i].numel()).zero_();
    }
    in_round_[i] = false;
  }
  bucket.complete.push_back(std::move(bucket.filling));
  bucket.filling = at::Tensor();
  bucket.filling_ready = 0;
}

void ReduceScatterRounds::launch_rounds_in_order(bool flush) {
  // Launches the next bucket's round while it has one complete. With
  // `flush` (finish(): every round is complete) a bucket with none left is
  // passed over; the queues are the same on every rank, so is the order.
  size_t idle = 0;
  while (idle < buckets_.size()) {
    Bucket& bucket = buckets_[next_launch_];
    if (bucket.complete.empty()) {
      if (!flush) return;
      ++idle;
    } else {
      idle = 0;
      InFlight round{next_launch_, std::move(bucket.complete.front()), {}};
      bucket.complete.pop_front();
      const int slot = slot_of(round.staging);
      if (slot >= 0) slot_state_[slot] = SlotState::in_flight;
      const at::Tensor whole = round.staging.narrow(0, 0, layout_.buckets[next_launch_].elements);
      if (compressed_ != nullptr) {
        round.work = compressed_->allreduce(whole.data_ptr<float>(), whole.numel(), static_cast<int>(next_launch_),
                                            ccl::ReduceOp::avg);
      } else if (comm_.size() > 1) {
        round.work = reduce_scatter_blocks_async(whole, comm_, ccl::ReduceOp::avg);
      }
      ++bucket.rounds;
      in_flight_.push_back(std::move(round));
    }
    next_launch_ = (next_launch_ + 1) % buckets_.size();
  }
}

void ReduceScatterRounds::fold_oldest_round() {
  at::NoGradGuard no_grad;
  InFlight& round = in_flight_.front();
  round.work.wait();
  Bucket& bucket = buckets_[round.bucket];
  const int64_t block = layout_.buckets[round.bucket].block(comm_.size());
  const at::Tensor mine = round.staging.narrow(0, comm_.rank() * block, block);
  if (bucket.shard_has_step) {
    bucket.shard_grad.add_(mine);
  } else {
    bucket.shard_grad.copy_(mine);
    bucket.shard_has_step = true;
  }
  const int slot = slot_of(round.staging);
  if (slot >= 0) {
    slot_state_[slot] = SlotState::free;
  } else {
    private_pool_.push_back(std::move(round.staging));
  }
  in_flight_.pop_front();
}

void ReduceScatterRounds::fold_in_flight(bool wait) {
  while (!in_flight_.empty() && (wait || in_flight_.front().work.test())) fold_oldest_round();
}

void ReduceScatterRounds::launch_remaining() {
  // Gradients set by hand (not through backward) join their rounds first.
  for (size_t i = 0; i < parameters_.size(); ++i) gradient_ready(i);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    // A bucket no gradient reached this step still gets one round of zeros.
    if (!bucket.filling.defined() && bucket.rounds == 0 && bucket.complete.empty()) {
      bucket.filling = acquire_staging(b);
    }
    if (bucket.filling.defined()) complete_round(b);
  }
  launch_rounds_in_order(/*flush=*/true);
}

void ReduceScatterRounds::wait_reductions() {
  fold_in_flight(/*wait=*/true);
  for (auto& bucket : buckets_) bucket.rounds = 0;
  next_launch_ = 0;
}

}  // namespace giant::parallel
