// Live and peak bytes of host tensor memory, per rank: torch's CPU allocator
// is replaced (once per process) by one that charges every allocation to the
// counter the allocating thread is bound to and records that counter in the
// allocation, so a tensor freed on another thread (a collective's helper, a
// later owner) is taken off the counter that paid for it. Tests run several
// ranks as threads of one process: a process-wide count would mix them.
// Threads with no binding (torch's intra-op pool, ccl's helpers) are
// charged to unbound_allocations(). Memory torch does not allocate (ccl's
// shared buffers, from_blob) is not counted here.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace giant::train {

class AllocationCounter {
 public:
  void add(int64_t bytes);
  void remove(int64_t bytes) { live_.fetch_sub(bytes, std::memory_order_relaxed); }
  int64_t live() const { return live_.load(std::memory_order_relaxed); }
  // The most live at once since the counter was made or reset_peak().
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(live(), std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> live_{0}, peak_{0};
};

// Makes torch's CPU allocator one that counts (idempotent, thread-safe; it
// allocates as c10's default does, 64-byte aligned). Tensors allocated
// before are not counted, and freeing them is not either.
void install_tracking_allocator();

// Charges the calling thread's allocations from now on to `counter` (null:
// unbound_allocations()); returns the previous binding.
std::shared_ptr<AllocationCounter> bind_thread_allocations(std::shared_ptr<AllocationCounter> counter);
// The counter the calling thread is bound to (null: none).
const std::shared_ptr<AllocationCounter>& thread_allocations();
// What threads with no binding allocated.
const std::shared_ptr<AllocationCounter>& unbound_allocations();

}  // namespace giant::train
