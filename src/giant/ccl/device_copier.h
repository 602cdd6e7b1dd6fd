// Copies between device and host memory, for the device backends that run
// device buffers through ccl's host path (staged_backend.h). An interface,
// so that those backends are tested without a device (a copier of host
// memory) and run on one (CUDA's).
#pragma once

#include <cstddef>
#include <memory>

namespace giant::ccl {

class DeviceCopier {
 public:
  virtual ~DeviceCopier() = default;
  // Copies `bytes` of device memory to host memory once the work queued on
  // `stream` (a cudaStream_t; null: the default stream) is done. Returns
  // when the host holds them.
  virtual void to_host(void* host, const void* device, size_t bytes, void* stream) = 0;
  // Copies `bytes` of host memory into device memory. Returns when the
  // device holds them, so work queued afterwards on any stream sees them.
  // Callable from any thread.
  virtual void to_device(void* device, const void* host, size_t bytes) = 0;
};

// The copier of this build's device: CUDA's on the calling thread's current
// device where ccl was built with CUDA (GIANT_CUDA); otherwise a
// giant::Error saying there is none.
std::unique_ptr<DeviceCopier> default_device_copier();

}  // namespace giant::ccl
