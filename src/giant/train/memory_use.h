// What one rank's memory holds, by kind, from Giant's own accounting (see
// MemoryMeter for where each number comes from), and the process's peak
// resident memory. Without libtorch: the log, metrics and TensorBoard read it.
#pragma once

#include <cstdint>
#include <string>

namespace giant::train {

struct MemoryUse {
  int64_t parameters = 0;       // the model's tensors in the compute dtype (ZeRO-3: shards plus gathered layers)
  int64_t gradients = 0;        // where gradients accumulate and are reduced (ZeRO-2/3: the owned shards)
  int64_t optimizer_state = 0;  // AdamW's two moments and, with mixed precision, the fp32 masters
  int64_t activations = 0;      // a step's peak of other tensor memory: saved activations, logits, transients
  int64_t comm_buffers = 0;     // staging for reductions and gathers that is not gradient or parameter storage
  int64_t max_rss = 0;          // the process's peak resident memory (all its ranks, when ranks are threads)

  int64_t model_states() const { return parameters + gradients + optimizer_state; }
  int64_t total() const { return model_states() + activations + comm_buffers; }
  bool measured() const { return total() > 0 || max_rss > 0; }
  // Each kind the larger of the two (peaks over steps).
  void take_max(const MemoryUse& other);
};

// "parameters 1.2 MiB, gradients 1.2 MiB, optimizer state 2.4 MiB,
// activations 5 MiB, comm buffers 0 B; total 9.8 MiB; peak RSS 300 MiB".
std::string describe_memory(const MemoryUse& use);

}  // namespace giant::train
