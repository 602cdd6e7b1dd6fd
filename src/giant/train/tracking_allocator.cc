#include "giant/train/tracking_allocator.h"

#include <mutex>
#include <new>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>

namespace giant::train {
namespace {

// The binding is per thread by design (a rank is a thread in tests, the
// main thread in a launched process).
thread_local std::shared_ptr<AllocationCounter> bound_counter;

// Each allocation carries its own record just before the data, so the
// context is the data pointer itself, as torch's raw_allocate() (used by
// some kernels for scratch space) requires of the CPU allocator.
struct Record {
  std::shared_ptr<AllocationCounter> counter;
  int64_t bytes;
};
// A multiple of c10's alignment: the data after the record stays aligned.
constexpr size_t kRecordSpace = ((sizeof(Record) + c10::gAlignment - 1) / c10::gAlignment) * c10::gAlignment;

void release(void* data) {
  if (data == nullptr) return;
  void* base = static_cast<char*>(data) - kRecordSpace;
  auto* record = static_cast<Record*>(base);
  record->counter->remove(record->bytes);
  record->~Record();
  c10::free_cpu(base);
}

class TrackingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) const override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (bytes == 0) return {nullptr, nullptr, &release, cpu};
    void* base = c10::alloc_cpu(bytes + kRecordSpace);
    const std::shared_ptr<AllocationCounter>& counter = bound_counter ? bound_counter : unbound_allocations();
    new (base) Record{counter, static_cast<int64_t>(bytes)};
    counter->add(static_cast<int64_t>(bytes));
    void* data = static_cast<char*>(base) + kRecordSpace;
    return {data, data, &release, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
};

}  // namespace

void AllocationCounter::add(int64_t bytes) {
  const int64_t now = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void install_tracking_allocator() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    // Lives as long as the process: tensors freed at exit still call into it.
    static TrackingAllocator* allocator = new TrackingAllocator();
    // The highest priority: a later SetCPUAllocator of lower priority does not unwrap it.
    c10::SetCPUAllocator(allocator, /*priority=*/255);
  });
}

std::shared_ptr<AllocationCounter> bind_thread_allocations(std::shared_ptr<AllocationCounter> counter) {
  return std::exchange(bound_counter, std::move(counter));
}

const std::shared_ptr<AllocationCounter>& thread_allocations() { return bound_counter; }

const std::shared_ptr<AllocationCounter>& unbound_allocations() {
  static const auto* counter = new std::shared_ptr<AllocationCounter>(std::make_shared<AllocationCounter>());
  return *counter;
}

}  // namespace giant::train
