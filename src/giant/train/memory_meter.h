// One rank's memory by kind, measured as it trains (the trainer owns one):
// - parameters, gradients and communication buffers from the data-parallel
//   engine's own accounting (GradientSync::held_bytes()) where it keeps one;
//   otherwise from the tensors themselves: the parameters, and the gradients
//   as the update reads them (the reducer's buckets, or the parameters'
//   .grad() when there is no reducer; at stages 2-3, which must keep their
//   own accounting, only the owned shards' gradients are visible);
// - optimizer state: AdamW's moments plus the fp32 masters (mixed precision);
// - activations: the step's peak of tensor memory this rank allocated through
//   torch's CPU allocator (tracking_allocator.h), less what was live when the
//   step started and less what the model states grew by during it (the
//   gradients autograd allocates without a reducer, ZeRO-3's gathered layers):
//   saved activations, the logits and loss, and forward's and backward's
//   transient buffers, including the optimizer step's.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/train/memory_use.h"

namespace giant::parallel {
class GradientSync;
}
namespace giant::optim {
class AdamW;
class MasterWeights;
}

namespace giant::train {

class AllocationCounter;

// What holds the model states (all owned by the trainer, outliving the meter's use).
struct ModelStateHolders {
  parallel::GradientSync* sync = nullptr;  // null: no reducer (the gradients stay in the parameters)
  std::vector<at::Tensor> parameters;      // this rank's
  const optim::AdamW* optimizer = nullptr;
  const optim::MasterWeights* masters = nullptr;  // null: no mixed precision
};

class MemoryMeter {
 public:
  // Installs the tracking allocator and binds the calling thread to this
  // rank's counter: make it before the rank allocates its model.
  MemoryMeter();
  ~MemoryMeter();
  MemoryMeter(const MemoryMeter&) = delete;
  MemoryMeter& operator=(const MemoryMeter&) = delete;

  // Binds the calling thread (the one that trains, if not the one that built).
  void bind_this_thread();
  void watch(ModelStateHolders holders);

  // Around one step (forward, backward and the update).
  void begin_step();
  // This step's use (each kind at its most during the step; max_rss the
  // process's so far).
  MemoryUse end_step();
  // The model states now (activations 0).
  MemoryUse model_states() const;

 private:
  // Parameters, gradients and comm buffers: now, or (from_peaks) at their most since the step began.
  MemoryUse held(bool from_peaks) const;

  std::shared_ptr<AllocationCounter> counter_;
  ModelStateHolders holders_;
  int64_t live_at_start_ = 0;
  MemoryUse states_at_start_;
};

}  // namespace giant::train
