#include "giant/train/memory_meter.h"

#include <algorithm>
#include <set>

#include "giant/base/host_memory.h"
#include "giant/optim/adamw.h"
#include "giant/optim/master_weights.h"
#include "giant/parallel/data_parallel/gradient_sync.h"
#include "giant/train/tracking_allocator.h"

namespace giant::train {
namespace {

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

// Bytes of distinct tensors (a tensor listed twice, such as a tied weight, once).
int64_t distinct_bytes(const std::vector<at::Tensor>& tensors) {
  std::set<std::pair<const void*, int64_t>> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (!t.defined() || !seen.insert({t.data_ptr(), t.numel()}).second) continue;
    total += bytes_of(t);
  }
  return total;
}

// Whether the engine keeps its own accounting (stages that fill HeldBytes).
bool keeps_accounts(const parallel::HeldBytesReport& report) { return report.now.total() > 0 || report.peak.total() > 0; }

}  // namespace

MemoryMeter::MemoryMeter() : counter_(std::make_shared<AllocationCounter>()) {
  install_tracking_allocator();
  bind_this_thread();
}

MemoryMeter::~MemoryMeter() {
  if (thread_allocations() == counter_) bind_thread_allocations(nullptr);
}

void MemoryMeter::bind_this_thread() { bind_thread_allocations(counter_); }

void MemoryMeter::watch(ModelStateHolders holders) { holders_ = std::move(holders); }

MemoryUse MemoryMeter::held(bool from_peaks) const {
  MemoryUse use;
  const parallel::GradientSync* sync = holders_.sync;
  if (sync && keeps_accounts(sync->held_bytes())) {
    const parallel::HeldBytesReport report = sync->held_bytes();
    const parallel::HeldBytes& bytes = from_peaks ? report.peak : report.now;
    use.parameters = bytes.parameters;
    use.gradients = bytes.gradients;
    use.comm_buffers = bytes.comm_buffers;
    return use;
  }
  use.parameters = distinct_bytes(holders_.parameters);
  std::vector<at::Tensor> gradients;
  if (sync) {
    gradients = sync->gradients();
  } else {
    for (const auto& p : holders_.parameters) gradients.push_back(p.grad());
  }
  use.gradients = distinct_bytes(gradients);
  return use;
}

MemoryUse MemoryMeter::model_states() const {
  MemoryUse use = held(false);
  if (const optim::AdamW* adam = holders_.optimizer) {
    for (size_t i = 0; i < adam->parameters().size(); ++i) {
      use.optimizer_state += bytes_of(adam->first_moment(i)) + bytes_of(adam->second_moment(i));
    }
  }
  if (holders_.masters) use.optimizer_state += distinct_bytes(holders_.masters->masters());
  return use;
}

void MemoryMeter::begin_step() {
  if (holders_.sync) holders_.sync->reset_peaks();
  states_at_start_ = model_states();
  counter_->reset_peak();
  live_at_start_ = counter_->live();
}

MemoryUse MemoryMeter::end_step() {
  MemoryUse use = model_states();
  const MemoryUse peaks = held(true);
  use.parameters = std::max({use.parameters, peaks.parameters, states_at_start_.parameters});
  use.gradients = std::max({use.gradients, peaks.gradients, states_at_start_.gradients});
  use.comm_buffers = std::max({use.comm_buffers, peaks.comm_buffers, states_at_start_.comm_buffers});
  const int64_t grown = std::max<int64_t>(0, use.total() - states_at_start_.total());
  use.activations = std::max<int64_t>(0, counter_->peak() - live_at_start_ - grown);
  use.max_rss = max_resident_bytes();
  return use;
}

}  // namespace giant::train
