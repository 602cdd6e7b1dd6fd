// ZeRO stage 2 of GradientReducer: each micro-batch's gradients reduced in
// rounds through pooled staging buffers into persistent gradient shards
// (see gradient_reducer.h).
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

// A staging buffer (staging_elements_ long: any bucket's round is its
// first elements) whose padding after the bucket's last parameter is zero.
// Rounds take the shared slots in turn, the same on every rank: a shared
// buffer names itself in the collective, so peers must agree on it. A slot
// whose round is in flight is waited for; one held by a round not launched
// yet is passed over for a private buffer (the same decision on every
// rank: launches follow the same order everywhere).
at::Tensor GradientReducer::acquire_staging(size_t bucket) {
  fold_in_flight(/*wait=*/false);  // rounds already reduced give their buffers back
  const size_t slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % staging_slots_.size();
  at::Tensor staging;
  if (slot_state_[slot] == SlotState::unlaunched) {
    if (private_pool_.empty()) {
      staging = torch::empty({staging_elements_}, staging_options_);
      ++staging_buffers_;
      update_held_bytes();
    } else {
      staging = std::move(private_pool_.back());
      private_pool_.pop_back();
    }
  } else {
    while (slot_state_[slot] == SlotState::in_flight) fold_oldest_round();
    staging = staging_slots_[slot];
    slot_state_[slot] = SlotState::unlaunched;
  }
  const Bucket& b = buckets_[bucket];
  if (b.content < b.elements) staging.narrow(0, b.content, b.elements - b.content).zero_();
  return staging;
}

int GradientReducer::slot_of(const at::Tensor& staging) const {
  for (size_t k = 0; k < staging_slots_.size(); ++k) {
    if (staging_slots_[k].data_ptr() == staging.data_ptr()) return static_cast<int>(k);
  }
  return -1;
}

void GradientReducer::accept_into_round(size_t parameter) {
  at::Tensor& grad = parameters_[parameter].mutable_grad();
  if (!grad.defined()) return;
  const size_t b = bucket_of_[parameter];
  Bucket& bucket = buckets_[b];
  if (!bucket.filling.defined()) {
    bucket.filling = acquire_staging(b);
    bucket.filling_ready = 0;
  }
  at::NoGradGuard no_grad;
  at::Tensor view = bucket.filling.narrow(0, offset_in_bucket_[parameter], grad.numel());
  if (in_round_[parameter]) {
    view.add_(grad.reshape({-1}));  // a second gradient before the round was complete
  } else {
    view.copy_(grad.reshape({-1}));
    in_round_[parameter] = true;
    ++bucket.filling_ready;
  }
  grad.reset();
  if (bucket.filling_ready == bucket.parameters) {
    complete_round(b);
    launch_rounds_in_order(/*flush=*/false);
  }
}

void GradientReducer::complete_round(size_t b) {
  Bucket& bucket = buckets_[b];
  for (size_t i : bucket.members) {
    if (!in_round_[i]) {  // finish(): no gradient came this round
      bucket.filling.narrow(0, offset_in_bucket_[i], parameters_[i].numel()).zero_();
    }
    in_round_[i] = false;
  }
  bucket.complete.push_back(std::move(bucket.filling));
  bucket.filling = at::Tensor();
  bucket.filling_ready = 0;
}

void GradientReducer::launch_rounds_in_order(bool flush) {
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
      if (comm_->size() > 1) {
        round.work = reduce_scatter_blocks_async(round.staging.narrow(0, 0, bucket.elements), *comm_,
                                                 ccl::ReduceOp::avg);
      }
      ++bucket.rounds;
      in_flight_.push_back(std::move(round));
    }
    next_launch_ = (next_launch_ + 1) % buckets_.size();
  }
}

void GradientReducer::fold_oldest_round() {
  at::NoGradGuard no_grad;
  InFlight& round = in_flight_.front();
  round.work.wait();
  Bucket& bucket = buckets_[round.bucket];
  const int64_t block = bucket.elements / comm_->size();
  const at::Tensor mine = round.staging.narrow(0, comm_->rank() * block, block);
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

void GradientReducer::fold_in_flight(bool wait) {
  while (!in_flight_.empty() && (wait || in_flight_.front().work.test())) fold_oldest_round();
}

double GradientReducer::finish_rounds() {
  // Gradients set by hand (not through backward) join their rounds first.
  for (size_t i = 0; i < parameters_.size(); ++i) accept_into_round(i);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    // A bucket no gradient reached this step still gets one round of zeros.
    if (!bucket.filling.defined() && bucket.rounds == 0 && bucket.complete.empty()) {
      bucket.filling = acquire_staging(b);
    }
    if (bucket.filling.defined()) complete_round(b);
  }
  launch_rounds_in_order(/*flush=*/true);
  Stopwatch watch;
  wait_parameters();  // normally done by the forward that used them
  fold_in_flight(/*wait=*/true);
  for (auto& bucket : buckets_) bucket.rounds = 0;
  next_launch_ = 0;
  return watch.seconds();
}

}  // namespace giant::parallel
